/* routes.h: the REST API's route table (routes.c), handed to http_create;
 * api/openapi.yaml describes each route (t1070 checks the two agree). */
#ifndef FMB_ROUTES_H
#define FMB_ROUTES_H

#include "dispatch.h"

extern const struct route broker_routes[];
extern const unsigned broker_nroutes;

#endif
