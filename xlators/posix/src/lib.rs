//! storage/posix: the brick backend on a local directory
