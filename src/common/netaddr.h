/* netaddr.h: "HOST:PORT" and "[IPV6]:PORT" to a socket address (numeric
 * addresses only: listeners are configured, not looked up). */
#ifndef FMB_NETADDR_H
#define FMB_NETADDR_H

#include <stddef.h>
#include <sys/socket.h>

int fmb_parse_hostport (const char *text, struct sockaddr_storage *ss, socklen_t *len);
/* The numeric address (no port) of an AF_INET or AF_INET6 'sa', "?" else. */
void fmb_format_addr (const struct sockaddr *sa, char *out, size_t len);
/* The client 'sa' as per-client limits count it: an IPv4 address (also
 * when it comes IPv4-mapped, ::ffff:a.b.c.d), or the /64 an IPv6 address
 * is in ("2001:db8:1:2::/64"): one host on a network that hands out /64s
 * has every address in it, so counting each would let it past any
 * per-address limit. */
void fmb_format_client (const struct sockaddr *sa, char *out, size_t len);

#endif
