//! cabprof's analyses: plain single-threaded consumers of CAB event words (method count, call
//! graph, call tree, Ball-Larus path profile, cache simulation, reuse distance). The same code
//! runs inline in the application thread (sequential mode) or on an analyzer thread.
