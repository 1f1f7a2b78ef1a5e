/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration table's rows: every variable collguard reads, declared
 * once with its type, default, accepted form and documentation, so parsing
 * (config_load.c, config_value.c), the `collguard-info -c` listing
 * (config_print.c) and the table of docs/configuration.md cannot drift
 * apart. Rows only: no code reads the environment here.
 * Layer: core/config; calls core/base only.
 */
#include "core/config/config_impl.h"

#include <stddef.h>

#define CG__OFF(f) offsetof(cg_config_t, f)

/* The accepted names of the enum variables, index = value, from each
 * enum's one list (config.h, core/base/enum.h, collguard/log.h). */
#define LOG_LEVEL_NAME(e, name, tag) name,
static const char *const log_levels[] = {CG_LOG_LEVEL_MAP(LOG_LEVEL_NAME) NULL};
#undef LOG_LEVEL_NAME
static const char *const probes[] = {CG_MEM_PROBE_MAP(CG_ENUM_NAME) NULL};
static const char *const transports[] = {CG_TRANSPORT_KIND_MAP(CG_ENUM_NAME)
                                         NULL};
static const char *const algos[] = {CG_COLL_ALGO_MAP(CG_ENUM_NAME) NULL};
static const char *const dup_policies[] = {CG_DUP_POLICY_MAP(CG_ENUM_NAME)
                                           NULL};
static const char *const backends[] = {CG_BACKEND_KIND_MAP(CG_ENUM_NAME)
                                       NULL};

const cg__field_t cg__config_fields[CG_CFG_COUNT] = {
    {CG_CFG_LOG_LEVEL, "CG_LOG_LEVEL", {NULL, NULL}, CG__T_ENUM, "warn",
     CG__OFF(log_level), log_levels, 0, 0, 0,
     "Log verbosity: none, error, warn, info, debug, trace."},
    {CG_CFG_MEM_PROBE, "CG_MEM_PROBE", {NULL, NULL}, CG__T_ENUM, "auto",
     CG__OFF(mem_probe), probes, 0, 0, 0,
     "Memory the governor watches: auto (this rank's GPU when CUDA sees one, "
     "else host), host, cuda. The GPU is the first CUDA tensor's, until "
     "then local rank % visible GPUs; it is read without creating a CUDA "
     "context."},
    {CG_CFG_MEM_RESERVE, "CG_MEM_RESERVE", {NULL, NULL}, CG__T_SIZE_OR_FRAC,
     "0", CG__OFF(mem_reserve), NULL, 0, 0, 0,
     "Memory left untouched for the framework: a size (1G) or a percentage "
     "of total (5%). budget = max(0, free - reserve) * fraction; the "
     "fraction already leaves the framework 3/4 of free memory, so the "
     "reserve is for a known extra headroom."},
    {CG_CFG_MEM_FRACTION, "CG_MEM_FRACTION", {NULL, NULL}, CG__T_FRACTION,
     "25%", CG__OFF(mem_fraction), NULL, 0, 0, 0,
     "Share of free memory above the reserve that collguard's buffers may "
     "use (25% or 0.25)."},
    {CG_CFG_FUSION_THRESHOLD, "CG_FUSION_THRESHOLD",
     {"HOROVOD_FUSION_THRESHOLD", NULL}, CG__T_SIZE, "128MiB",
     CG__OFF(fusion_threshold), NULL, 0, 0, 0,
     "Largest fusion buffer (bytes or 64M); 0 disables fusion. The governor "
     "may choose less, never more."},
    {CG_CFG_FUSION_MIN, "CG_FUSION_MIN", {NULL, NULL}, CG__T_SIZE, "1MiB",
     CG__OFF(fusion_min), NULL, 0, 0, 0,
     "Floor of the fusion buffer under pressure."},
    {CG_CFG_CHUNK_SIZE, "CG_CHUNK_SIZE", {NULL, NULL}, CG__T_SIZE, "4MiB",
     CG__OFF(chunk_size), NULL, 0, 0, 0,
     "Largest pipeline chunk: of ring collectives, and of the Horovod "
     "shim's pinned staging slots for CUDA tensors on COLLGUARD and MPI. "
     "The governor picks the chunk below it from the budget (smaller under "
     "pressure); the staged collectives cut at the least chunk any rank's "
     "slots hold (agreed in negotiation whenever one changes), so ranks "
     "may differ."},
    {CG_CFG_CHUNK_MIN, "CG_CHUNK_MIN", {NULL, NULL}, CG__T_SIZE, "64KiB",
     CG__OFF(chunk_min), NULL, 0, 0, 0,
     "Floor of the pipeline chunk (and of the staging slots) under "
     "pressure."},
    {CG_CFG_NCCL_BUFFSIZE, "CG_NCCL_BUFFSIZE", {"NCCL_BUFFSIZE", NULL},
     CG__T_SIZE, "4MiB", CG__OFF(nccl_buffsize), NULL, 0, 0, 0,
     "Largest NCCL_BUFFSIZE the governor exports before NCCL starts; a "
     "user-set NCCL_BUFFSIZE is respected as the cap."},
    {CG_CFG_NCCL_BUFFSIZE_MIN, "CG_NCCL_BUFFSIZE_MIN", {NULL, NULL},
     CG__T_SIZE, "256KiB", CG__OFF(nccl_buffsize_min), NULL, 0, 0, 0,
     "Floor of the exported NCCL_BUFFSIZE."},
    {CG_CFG_PRESSURE_WARN, "CG_PRESSURE_WARN", {NULL, NULL},
     CG__T_SIZE_OR_FRAC, "2GiB", CG__OFF(pressure_warn), NULL, 0, 0, 0,
     "Free memory below this is pressure level WARN: a size (2G) or a "
     "percentage of total (10%)."},
    {CG_CFG_PRESSURE_CRITICAL, "CG_PRESSURE_CRITICAL", {NULL, NULL},
     CG__T_SIZE_OR_FRAC, "512MiB", CG__OFF(pressure_critical), NULL, 0, 0,
     0,
     "Free memory below this is pressure level CRITICAL (a size or a "
     "percentage of total; at most CG_PRESSURE_WARN)."},
    {CG_CFG_PRESSURE_HYSTERESIS, "CG_PRESSURE_HYSTERESIS", {NULL, NULL},
     CG__T_SIZE_OR_FRAC, "256MiB", CG__OFF(pressure_hysteresis), NULL, 0, 0,
     0,
     "A level is left only when free memory rises this far (a size or a "
     "percentage of total) above its threshold..."},
    {CG_CFG_PRESSURE_DWELL, "CG_PRESSURE_DWELL", {NULL, NULL}, CG__T_DURATION,
     "1s", CG__OFF(pressure_dwell_ns), NULL, 0, 0, 1000000000ull,
     "...and stays there this long (bare number: seconds)."},
    {CG_CFG_PROBE_INTERVAL, "CG_PROBE_INTERVAL", {NULL, NULL},
     CG__T_DURATION, "100ms", CG__OFF(probe_interval_ns), NULL, 0, 0,
     1000000ull,
     "How often the governor samples free memory (bare number: ms)."},
    {CG_CFG_OOM_WINDOW, "CG_OOM_WINDOW", {NULL, NULL}, CG__T_DURATION, "5s",
     CG__OFF(oom_window_ns), NULL, 0, 0, 1000000000ull,
     "Early warning: slope of used memory over this window; a projected OOM "
     "within it raises a warning (bare number: seconds)."},
    {CG_CFG_FAULT_ALLOC, "CG_FAULT_ALLOC", {NULL, NULL}, CG__T_INT, "0",
     CG__OFF(fault_alloc), NULL, 0, 1000000000, 0,
     "Testing: fail every Nth buffer allocation (fusion, ring, staging, "
     "registration; 0: off). CONTROL allocations are never failed."},
    {CG_CFG_FAULT_COLLECTIVE, "CG_FAULT_COLLECTIVE", {NULL, NULL}, CG__T_INT,
     "0", CG__OFF(fault_collective), NULL, 0, 1000000000, 0,
     "Testing: the Horovod shim's Nth allreduce or broadcast on this rank "
     "fails as if its backend broke (an MPI or NCCL error; 0: off)."},
    {CG_CFG_FAULT_STAGING, "CG_FAULT_STAGING", {NULL, NULL}, CG__T_BOOL, "0",
     CG__OFF(fault_staging), NULL, 0, 0, 0,
     "Testing: 1 refuses this rank's staging slots for CUDA tensors, as if "
     "no pinned memory were left (nothing else is refused): it offers no "
     "staging chunk, and every rank's staged CUDA collectives fail naming "
     "it."},
    {CG_CFG_TRANSPORT, "CG_TRANSPORT", {NULL, NULL}, CG__T_ENUM, "auto",
     CG__OFF(transport), transports, 0, 0, 0,
     "Point-to-point transport: auto (UCX when built in), ucx, socket."},
    {CG_CFG_TIMEOUT, "CG_TIMEOUT", {NULL, NULL}, CG__T_DURATION, "30s",
     CG__OFF(timeout_ns), NULL, 0, 0, 1000000000ull,
     "A dead or silent peer fails pending requests within this time "
     "(bare number: seconds; at least 1s)."},
    {CG_CFG_SOCKET_IFNAME, "CG_SOCKET_IFNAME", {"NCCL_SOCKET_IFNAME", NULL},
     CG__T_STRING, "", CG__OFF(socket_ifname), NULL, 0, 0, 0,
     "Network interface(s) for sockets, as NCCL_SOCKET_IFNAME: prefix list "
     "(eth,ib), ^ to exclude, = for exact; empty: as NCCL, ib* if any, else "
     "all but docker*, lo* and virbr*, else docker*, else loopback."},
    {CG_CFG_SOCKET_NSOCKS, "CG_SOCKET_NSOCKS", {NULL, NULL}, CG__T_INT, "1",
     CG__OFF(socket_nsocks), NULL, 1, 16, 0,
     "TCP sockets per connection (1-16); large messages are striped."},
    {CG_CFG_GPU_BATCH_COPIES, "CG_GPU_BATCH_COPIES", {NULL, NULL},
     CG__T_BOOL, "1", CG__OFF(gpu_batch_copies), NULL, 0, 0, 0,
     "Horovod shim, CUDA tensors: the copies of a fused group into and out "
     "of the device fusion buffer (each up to 256KiB) made by one kernel "
     "launch instead of one cudaMemcpyAsync per tensor; 0: one copy each "
     "(for comparison). Needs a build with CUDA's compiler."},
    {CG_CFG_GPU_STAGE_PIPELINE, "CG_GPU_STAGE_PIPELINE", {NULL, NULL},
     CG__T_BOOL, "1", CG__OFF(gpu_stage_pipeline), NULL, 0, 0, 0,
     "Horovod shim, CUDA tensors through a host backend (COLLGUARD, MPI): "
     "staged over two pinned slots of the governor's chunk (see "
     "CG_CHUNK_SIZE) and two streams, so the copies of the chunks before "
     "and after overlap the host collective; 0: one chunk at a time "
     "through one slot (for comparison)."},
    {CG_CFG_GPU_STAGE_EMULATE, "CG_GPU_STAGE_EMULATE", {NULL, NULL},
     CG__T_BOOL, "0", CG__OFF(gpu_stage_emulate), NULL, 0, 0, 0,
     "Testing: 1 makes the Horovod shim size its CUDA staging slots (in "
     "plain host memory where no GPU is in use) and offer their chunk every "
     "cycle as a rank staging CUDA tensors does, so the ranks' agreement on "
     "the staging chunk runs without a GPU; CUDA tensors still need one."},
    {CG_CFG_UCX_SHM_ZCOPY, "CG_UCX_SHM_ZCOPY", {NULL, NULL}, CG__T_BOOL, "0",
     CG__OFF(ucx_shm_zcopy), NULL, 0, 0, 0,
     "UCX transport: 1 creates endpoints to peers on the same host without "
     "UCX error handling when all their lanes are shared memory, so UCX "
     "1.13 uses zero-copy CMA (faster point-to-point at 32KiB-32MiB on a "
     "16-core host, but the collectives' 64-128KiB pieces ran 1.3-1.6x "
     "slower on a 2-core host); the control socket then watches the peer. "
     "0: UCX peer error handling on every endpoint. Must match on all "
     "ranks of a host to take effect."},
    {CG_CFG_ALGO, "CG_ALGO", {NULL, NULL}, CG__T_ENUM, "auto",
     CG__OFF(algo), algos, 0, 0, 0,
     "Collective algorithm: auto (AllReduce through shared memory when "
     "every rank is on one host, else by size: recursive doubling / "
     "binomial tree up to 64KiB, ring / pipelined chain above), ring, rd, "
     "shm (shared memory, and communicator creation fails where it cannot "
     "be set up). Must be the same on every rank."},
    {CG_CFG_SHM_SLOT, "CG_SHM_SLOT", {NULL, NULL}, CG__T_SIZE, "512KiB",
     CG__OFF(shm_slot), NULL, 0, 0, 0,
     "Shared-memory AllReduce: bytes of each of the two slots every rank "
     "maps in /dev/shm per communicator (64KiB-1GiB; 0: no shared "
     "memory). The smallest of the ranks' values is used."},
    {CG_CFG_SHM_CALIBRATE, "CG_SHM_CALIBRATE", {NULL, NULL}, CG__T_BOOL, "1",
     CG__OFF(shm_calibrate), NULL, 0, 0, 0,
     "With CG_ALGO=auto and shared memory: the first AllReduce above 64KiB "
     "times shared memory against the transport on 1MiB (best of 3, the "
     "slowest rank's) and larger AllReduces take the faster from then on "
     "(the same bits either way); 0: shared memory at every size."},
    {CG_CFG_DYNAMIC_PROCESS_SETS, "CG_DYNAMIC_PROCESS_SETS",
     {"HOROVOD_DYNAMIC_PROCESS_SETS", NULL}, CG__T_INT, "0",
     CG__OFF(dynamic_process_sets), NULL, 0, 1, 0,
     "Horovod shim: 1 allows adding and removing process sets after "
     "horovod_init (hvd.init(process_sets=\"dynamic\") sets it), as "
     "Horovod."},
    {CG_CFG_CYCLE_TIME, "CG_CYCLE_TIME", {"HOROVOD_CYCLE_TIME", NULL},
     CG__T_DURATION, "1ms", CG__OFF(cycle_time_ns), NULL, 0, 0, 1000000ull,
     "Horovod shim: period of the background cycle that negotiates and "
     "runs ready collectives (bare number: ms, as Horovod)."},
    {CG_CFG_SPIN_TIME, "CG_SPIN_TIME", {NULL, NULL}, CG__T_DURATION,
     "50us", CG__OFF(spin_time_ns), NULL, 0, 0, 1000ull,
     "Horovod shim: how long a thread waiting on a request, and the "
     "background thread after a cycle, busy-poll before sleeping (waking "
     "a sleeping thread costs 5-50us at each hand-off; bare number: us). "
     "The most: spins that keep missing are halved, a hit restores it. "
     "Off (logged) where a rank is bound to fewer than 2 CPUs, or unbound "
     "with fewer than 2 CPUs per rank on its host; 0: always off."},
    {CG_CFG_DUPLICATE_POLICY, "CG_DUPLICATE_POLICY", {NULL, NULL},
     CG__T_ENUM, "coalesce", CG__OFF(duplicate_policy), dup_policies, 0,
     0, 0,
     "Horovod shim: a second enqueue of a name still in flight with the "
     "same buffer, size and op: coalesce (reduced once, both handles "
     "complete, warned once per name) or error (Horovod's ValueError)."},
    {CG_CFG_CACHE_CAPACITY, "CG_CACHE_CAPACITY",
     {"HOROVOD_CACHE_CAPACITY", NULL}, CG__T_INT, "1024",
     CG__OFF(cache_capacity), NULL, 0, 1048576, 0,
     "Horovod shim: names the response cache keeps (same value on every "
     "rank); a cached name is negotiated by one bit instead of a record. "
     "0 disables the cache."},
    {CG_CFG_STALL_CHECK_TIME, "CG_STALL_CHECK_TIME",
     {"HOROVOD_STALL_CHECK_TIME_SECONDS", NULL}, CG__T_DURATION, "60s",
     CG__OFF(stall_check_ns), NULL, 0, 0, 1000000000ull,
     "Horovod shim: rank 0 warns, at most once per this period, about "
     "tensors some ranks enqueued and others have not for this long, "
     "naming the missing ranks (bare number: seconds)."},
    {CG_CFG_STALL_SHUTDOWN_TIME, "CG_STALL_SHUTDOWN_TIME",
     {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", NULL}, CG__T_DURATION, "0",
     CG__OFF(stall_shutdown_ns), NULL, 0, 0, 1000000000ull,
     "Horovod shim: a stall this long stops the core on every rank and "
     "fails pending requests with the stalled tensors and missing ranks "
     "(bare number: seconds; 0: never)."},
    {CG_CFG_STALL_CHECK_DISABLE, "CG_STALL_CHECK_DISABLE",
     {"HOROVOD_STALL_CHECK_DISABLE", NULL}, CG__T_BOOL, "0",
     CG__OFF(stall_check_disable), NULL, 0, 0, 0,
     "Horovod shim: 1 turns the stall inspector off (no warnings, no "
     "stall shutdown)."},
    {CG_CFG_METRICS_FILE, "CG_METRICS_FILE", {NULL, NULL}, CG__T_STRING, "",
     CG__OFF(metrics_file), NULL, 0, 255, 0,
     "Prometheus text-format metrics file (node_exporter's textfile "
     "collector), rewritten atomically every CG_METRICS_PERIOD and at "
     "shutdown by the Horovod shim; %r is replaced by the rank; empty: "
     "none."},
    {CG_CFG_METRICS_PERIOD, "CG_METRICS_PERIOD", {NULL, NULL},
     CG__T_DURATION, "1s", CG__OFF(metrics_period_ns), NULL, 0, 0,
     1000000000ull,
     "How often CG_METRICS_FILE is rewritten (bare number: seconds; at "
     "least 10ms)."},
    {CG_CFG_METRICS_PORT, "CG_METRICS_PORT", {NULL, NULL}, CG__T_INT, "0",
     CG__OFF(metrics_port), NULL, 0, 1000000, 0,
     "Horovod shim: serve the metrics (the same text as CG_METRICS_FILE) "
     "over HTTP at http://CG_METRICS_ADDR:PORT/metrics from a background "
     "thread, PORT = this value + the local rank (ranks of one host get "
     "consecutive ports); GET /metrics only. 0: no endpoint. A port above "
     "65535, in use or a build without libmicrohttpd is an error at start "
     "and the job goes on without the endpoint."},
    {CG_CFG_METRICS_ADDR, "CG_METRICS_ADDR", {NULL, NULL}, CG__T_STRING,
     "127.0.0.1", CG__OFF(metrics_addr), NULL, 0, 63, 0,
     "IPv4 address the CG_METRICS_PORT endpoint listens on (0.0.0.0: every "
     "interface; default: loopback only)."},
    {CG_CFG_CPU_OPERATIONS, "CG_CPU_OPERATIONS",
     {"HOROVOD_CPU_OPERATIONS", NULL}, CG__T_ENUM, "COLLGUARD",
     CG__OFF(cpu_operations), backends, 0, CG_BACKEND_NCCL, 0,
     "Horovod shim: backend of host tensors: COLLGUARD (own collectives "
     "over CG_TRANSPORT, any launcher) or MPI (MPI_Allreduce/MPI_Bcast/"
     "MPI_Reduce_scatter; needs a launch by mpirun). Any case; Horovod's GLOO and CCL are not "
     "available."},
    {CG_CFG_GPU_OPERATIONS, "CG_GPU_OPERATIONS",
     {"HOROVOD_GPU_OPERATIONS", NULL}, CG__T_ENUM, "AUTO",
     CG__OFF(gpu_operations), backends, 0, 0, 0,
     "Horovod shim: backend of CUDA tensors: NCCL, MPI or COLLGUARD (both "
     "host-staged); AUTO: at the first CUDA collective, NCCL where its "
     "communicator (CG_NCCL_COST) fits every rank's governor budget, else "
     "COLLGUARD; and COLLGUARD if NCCL's creation then fails for memory on "
     "any rank (every rank agrees; logged at info, counted in the "
     "metrics). COLLGUARD where NCCL is not built in."},
    {CG_CFG_NCCL_COST, "CG_NCCL_COST", {NULL, NULL}, CG__T_SIZE, "0",
     CG__OFF(nccl_cost), NULL, 0, 0, 0,
     "Device memory AUTO expects NCCL's communicator to take (a size, as "
     "measured on this GPU: the info line 'nccl communicator ready' and "
     "the metric collguard_hvd_nccl_create_bytes give it); 0: estimated from NCCL's fixed cost (494MiB, measured on "
     "an H100 with NCCL 2.28), NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS and the "
     "ranks of this host."},
    {CG_CFG_FAULT_NCCL_INIT, "CG_FAULT_NCCL_INIT", {NULL, NULL}, CG__T_BOOL,
     "0", CG__OFF(fault_nccl_init), NULL, 0, 0, 0,
     "Testing: 1 fails this rank's NCCL communicator creation as if out of "
     "device memory, after NCCL's own init (the other ranks' complete), so "
     "AUTO's agreed fallback to COLLGUARD runs."},
    {CG_CFG_TIMELINE, "CG_TIMELINE", {"HOROVOD_TIMELINE", NULL},
     CG__T_STRING, "", CG__OFF(timeline), NULL, 0, 1023, 0,
     "Horovod shim: rank 0 writes a Chrome trace (JSON, opens in Perfetto) "
     "of negotiation, fused collectives and governor counters to this "
     "file; DYNAMIC: only between horovod_start_timeline and "
     "horovod_stop_timeline; empty: no timeline."},
    {CG_CFG_TIMELINE_MARK_CYCLES, "CG_TIMELINE_MARK_CYCLES",
     {"HOROVOD_TIMELINE_MARK_CYCLES", NULL}, CG__T_BOOL, "0",
     CG__OFF(timeline_mark_cycles), NULL, 0, 0, 0,
     "Horovod shim: 1 adds a CYCLE_START instant per background cycle to "
     "the timeline."},
    {CG_CFG_TIMELINE_COUNTER_PERIOD, "CG_TIMELINE_COUNTER_PERIOD",
     {NULL, NULL}, CG__T_DURATION, "100ms",
     CG__OFF(timeline_counter_period_ns), NULL, 0, 0, 1000000ull,
     "Horovod shim: how often the timeline records counters (free memory, "
     "budget, fusion buffer, chunk, pressure; bare number: ms); 0: every "
     "cycle."},
    {CG_CFG_TUNER_RULES, "CG_TUNER_RULES", {"NCCL_TUNER_CONFIG_FILE", NULL},
     CG__T_STRING, "", CG__OFF(tuner_rules), NULL, 0, 1023, 0,
     "NCCL tuner plugin: CSV file of rules (collective, min bytes, max "
     "bytes, algorithm, protocol, channels, nNodes, nRanks); empty: none."},
    {CG_CFG_TUNER_CHANNELS_WARN, "CG_TUNER_CHANNELS_WARN", {NULL, NULL},
     CG__T_INT, "0", CG__OFF(tuner_channels_warn), NULL, 0, 64, 0,
     "NCCL tuner plugin: most channels a collective may use at pressure "
     "WARN; 0: NCCL's. A cap saves no memory (NCCL connects all of a "
     "communicator's channels when an algorithm first runs) and costs "
     "bandwidth; NCCL_MAX_NCHANNELS before communicator creation is the "
     "lever for channel memory."},
    {CG_CFG_TUNER_CHANNELS_CRITICAL, "CG_TUNER_CHANNELS_CRITICAL",
     {NULL, NULL}, CG__T_INT, "0", CG__OFF(tuner_channels_critical), NULL, 0,
     64, 0,
     "NCCL tuner plugin: most channels at pressure CRITICAL; 0: NCCL's "
     "(see CG_TUNER_CHANNELS_WARN)."},
};

const char *cg_config_name(cg_config_id_t id)
{
    return (id >= 0 && id < CG_CFG_COUNT) ? cg__config_fields[id].name : "?";
}
