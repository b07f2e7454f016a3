/* netaddr.c: see netaddr.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netaddr.h"

int fmb_parse_hostport (const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[128], *end;
    const char *colon = strrchr (text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof (host)) {
        errno = EINVAL;
        return -1;
    }
    snprintf (host, sizeof (host), "%.*s", (int)(colon - text), text);
    unsigned long port = strtoul (colon + 1, &end, 10);
    if (*end || port > 65535) {
        errno = EINVAL;
        return -1;
    }
    memset (ss, 0, sizeof (*ss));
    if (host[0] == '[') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        size_t n = strlen (host);
        if (n < 2 || host[n - 1] != ']') {
            errno = EINVAL;
            return -1;
        }
        host[n - 1] = '\0';
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons ((uint16_t)port);
        *len = sizeof (*s6);
        return inet_pton (AF_INET6, host + 1, &s6->sin6_addr) == 1
                   ? 0
                   : (errno = EINVAL, -1);
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons ((uint16_t)port);
    *len = sizeof (*s4);
    return inet_pton (AF_INET, host, &s4->sin_addr) == 1 ? 0 : (errno = EINVAL, -1);
}

void fmb_format_addr (const struct sockaddr *sa, char *out, size_t len)
{
    const void *a = NULL;
    if (sa->sa_family == AF_INET)
        a = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!a || !inet_ntop (sa->sa_family, a, out, (socklen_t)len))
        snprintf (out, len, "?");
}

void fmb_addr_guess_key (const char *addr, char *out, size_t len)
{
    struct in6_addr a;
    char text[INET6_ADDRSTRLEN];
    if (inet_pton (AF_INET6, addr, &a) != 1) {
        snprintf (out, len, "%s", addr);
        return;
    }
    if (IN6_IS_ADDR_V4MAPPED (&a)) {
        if (!inet_ntop (AF_INET, &a.s6_addr[12], out, (socklen_t)len))
            snprintf (out, len, "%s", addr);
        return;
    }
    memset (&a.s6_addr[8], 0, 8);
    if (!inet_ntop (AF_INET6, &a, text, sizeof (text)))
        snprintf (out, len, "%s", addr);
    else
        snprintf (out, len, "%s/64", text);
}
