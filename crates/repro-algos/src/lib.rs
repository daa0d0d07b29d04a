//! Decentralized SGD algorithms over flat parameter buffers and the
//! virtual-clock simulator (issue "Algorithms and the virtual-clock simulator").
//!
//! Not implemented yet: this crate holds the place in the workspace so the
//! dependency graph (codec <- algos <- trainer, codec <- driver) is fixed from
//! the start. It exposes nothing.
