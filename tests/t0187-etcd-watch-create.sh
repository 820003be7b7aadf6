#!/bin/bash
#
# Every watch of a stream is created on its first connection: a stream's
# create requests are all in its body, and the request asks for 100 Continue
# so that etcd's gateway (Go's HTTP/1.1 server) does not discard the part it
# had not read when it answered (etcd_watch.c, watch_connect).  A stream that
# lost its last creates waits and connects again: 200 streams of 20 ranges
# here needed no second connection.  The cases are C, in
# tests/unit/test_etcd_watch_create.c, run here against a real etcd.

test_description='a watch stream creates all its watches at once'
. "$(dirname "$0")/test-lib.sh"
start_etcd

test_etcd_driver test_etcd_watch_create watch-create 3

test_done
