// Package usage owns GPU accounting: DCGM time series in, GPU-seconds out.
//
// Over a window it integrates, per GPU or MIG slice, container, pod,
// namespace, node and cluster, the GPU-seconds allocated to pods, the
// GPU-seconds active (the activity ratio integrated over time), those idle
// while allocated and those unallocated; VRAM percentiles, DRAM activity,
// power and energy; cost per allocated and per active GPU-hour and the cost
// of idle allocation; start-up phases; the user's application metric; and a
// usage pattern per pod with the numbers that support it.
//
// Account reads raw samples; AccountBuckets (and BucketAccount, which takes
// them as they arrive) gives the same report from per-hour buckets that a
// PromQL engine summed, for windows of days to months; BucketAccount.Clone
// lets a sliding window account its complete hours once and only the
// partial hour at each refresh.
//
// Missing data is unknown, never zero: every figure that depends on samples
// says how much of the window it covers, and NaN samples, gaps and counter
// resets are counted in Quality.
//
// usage is a pure package: it must not import client-go, net/http, the
// Prometheus client or any CLI library. Edges turn their data into Series.
package usage
