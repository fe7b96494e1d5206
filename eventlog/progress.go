package eventlog

// Progress is told, during a long pass over the log, how many records of
// how many it has done. It runs on the pass's goroutine, so it must be
// quick.
type Progress func(done, total uint64)

// progressEvery is how many records an export writes between two
// Progress calls.
const progressEvery = 10_000
