package kafkarelay

// BatchFunc is the function Handler wraps, for the benchmarks: they call
// it directly to time the producing without an outbox around it.
var BatchFunc = batchFunc
