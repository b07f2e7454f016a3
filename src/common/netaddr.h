/* netaddr.h: "HOST:PORT" and "[IPV6]:PORT" to a socket address (numeric
 * addresses only: listeners are configured, not looked up). */
#ifndef FMB_NETADDR_H
#define FMB_NETADDR_H

#include <sys/socket.h>

int fmb_parse_hostport (const char *text, struct sockaddr_storage *ss, socklen_t *len);

#endif
