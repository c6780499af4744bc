/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_SERVICE_ROUTES_H
#define AIRLOCK_SERVICE_ROUTES_H

/*
 * The service's API on the HTTP server core: the service object
 * (server.c), the routes and their dispatch (routes.c), and the jobs
 * behind them: the lifecycle verbs (job_lifecycle.c: health, list,
 * provision, cancel, destroy), the execute with its NDJSON stream
 * (job_execute.c), the workspace verbs (job_workspace.c). Each job takes
 * the request's decoded route (svc_req) and answers it through the core.
 */

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "airlock/service.h"
#include "http/http.h"
#include "service/server_internal.h"

/* How often a waiting thread looks at its client's socket: the delay
 * before a disconnect cancels a command. */
#define SVC_POLL_MS 100

typedef struct svc_job svc_job;

struct airlock_service {
	airlock_service_config cfg; /* strings not kept */
	airlock_exec *exec;
	/* The socket we listen on (a Unix socket file is removed at free if
	 * still ours); its fd is -1 while the server core owns the descriptor. */
	http_listener lis;
	http_server *http;

	struct svc_threads *threads; /* the execute threads (threads.h) */
	pthread_mutex_t lock;
	svc_job *jobs; /* executes running, for cancel */
	bool shutting_down;
	int stop_efd;
	pthread_t expire_thread;
	bool expire_started;
	struct svc_reaper *reaper; /* NULL: no reaper (svc_service_reaper_start) */
	struct svc_pool *pool;     /* NULL: no warm pool (svc_service_pool_start) */
};

/* A request's route (http_request_state). */
typedef struct svc_req {
	airlock_service *s;
	http_request *r;
	svc_verb verb;
	char id[AIRLOCK_ENVIRONMENT_ID_MAX];
	const char *query; /* into the request's target */
	size_t query_len;
	airlock_environment_handle handle;
	bool has_handle;
} svc_req;

/* routes.c: the route table the service's server core runs on. */
extern const http_routes svc_routes;
/* The core's status for the error's wire class, but 404 for an
 * ExecutionRejected about an id that is not live, asked of the table
 * rather than read from the message. */
http_result svc_respond_error(svc_req *q, const airlock_error *e);
/* Answer o's compact text (o released); when o is NULL or its text cannot
 * be made (no memory), an ExecutionUnavailable error naming what ("list")
 * instead. */
http_result svc_respond_json(svc_req *q, unsigned status, json_t *o, const char *what);

/* job_lifecycle.c */
http_result svc_do_health(svc_req *q);
http_result svc_do_list(svc_req *q);
http_result svc_do_provision(svc_req *q);
http_result svc_do_cancel(svc_req *q);
http_result svc_do_destroy(svc_req *q);

/* job_execute.c */
http_result svc_do_execute(svc_req *q);
/* Fire the cancel of q's running executes (s->jobs): *ret_cancelled when
 * one was. Returns false when a running execute's handle is not q's,
 * every field (nothing is then fired). */
bool svc_jobs_cancel(svc_req *q, bool *ret_cancelled);

/* job_workspace.c */
http_result svc_do_workspace(svc_req *q);
/* GET .../workspace/stream: the file streamed from its descriptor with the
 * service's SHA-256 of what it read in the trailer. */
http_result svc_do_workspace_stream(svc_req *q);

#endif
