/* netaddr.h: "HOST:PORT" and "[IPV6]:PORT" to a socket address (numeric
 * addresses only: listeners are configured, not looked up). */
#ifndef FMB_NETADDR_H
#define FMB_NETADDR_H

#include <stddef.h>
#include <sys/socket.h>

int fmb_parse_hostport (const char *text, struct sockaddr_storage *ss, socklen_t *len);
/* The numeric address (no port) of an AF_INET or AF_INET6 'sa', "?" else. */
void fmb_format_addr (const struct sockaddr *sa, char *out, size_t len);
/* The numeric address 'addr' (fmb_format_addr's text) as failed
 * authentications are counted: an IPv6 address as the /64 it is in
 * ("2001:db8:1:2::/64"), since one host on a network that hands out /64s
 * has every address in it and could guess from each in turn; an
 * IPv4-mapped one (::ffff:a.b.c.d) as its IPv4 address; anything else as
 * it is.  (Connections are counted per address: the nodes of an IPv6
 * cluster share one /64.) */
void fmb_addr_guess_key (const char *addr, char *out, size_t len);

#endif
