//! Whole graphs in-process.
