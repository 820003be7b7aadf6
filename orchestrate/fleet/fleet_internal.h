/*
 * fleet_internal.h — what the files of the fleet layer share and nobody else
 * needs.
 */
#ifndef ORCHESTRATE_FLEET_INTERNAL_H
#define ORCHESTRATE_FLEET_INTERNAL_H

#include "fleet/fleet.h"

/* The key prefix of f, "" for none: what every key builder takes. */
static inline const char *fleet_prefix(const struct fleet *f)
{
	return f->prefix ? f->prefix : "";
}

#endif
