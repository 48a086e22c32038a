//! A copy-me translator with no overrides: a valid pass-through layer
