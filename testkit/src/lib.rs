//! Test tools for translators.
