//! The xlfs graph engine: parses RON volfiles, finds translator types (built in or loaded from
//! cdylibs), builds and validates graphs, reconfigures them and switches graphs while fops
//! are in flight.
#![allow(non_local_definitions)]

pub mod services;
