/*
 * hiera.h — the service catalog (fleet/catalog.h) rendered as a hiera YAML file.
 *
 * Rendering goes through libyaml's emitter (never printf), sorts everything,
 * and so gives the same bytes for the same catalog: an unchanged catalog never
 * rewrites the file.
 *
 *   ---
 *   services::glance::eth0:
 *   - 10.0.0.5
 *   - 10.0.0.6
 *   healthy_services::glance::eth0:
 *   - 10.0.0.5
 */
#ifndef ORCHESTRATE_HIERA_H
#define ORCHESTRATE_HIERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/fileio.h"	/* file_write_atomic(), which installs the hiera file */
#include "fleet/catalog.h"

/* Renders the catalog (sorted first) as hiera YAML into out. */
int hiera_render(struct catalog *c, struct buf *out);

#endif
