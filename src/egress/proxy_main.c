/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress proxy's own program (proxy_internal.h says why it is one):
 * meson.build links it from the core's and the service side's archives,
 * not from libairlock-service.so (which embeds it), and embeds it as
 * egress_proxy_blob.
 */
#include "egress/proxy_internal.h"

int main(void)
{
	proxy_exec_main();
}
