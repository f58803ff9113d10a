//! Several hosts over a real 3-node NATS JetStream cluster: convergence, races
//! for a name, the sweeper lease, compaction of the stream (a property test),
//! NATS servers SIGKILLed under load, and
//! `serve --nats` daemons driven by the real CLI and the Python client, and
//! `agentlog bench cluster` run for real against NATS and etcd.
//!
//! One test binary: each file of `tests/cluster/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod cluster {
    mod bench;
    mod compaction;
    mod compaction_gaps;
    mod convergence;
    mod daemon;
    mod heartbeats;
    mod history;
    mod host_probe;
    mod nats_kill;
    mod orphans;
    mod races;
    mod replica_watch;
    mod stale;
    mod sweep;
}
