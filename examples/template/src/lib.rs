//! `example/template`: a translator with no overrides. Every fop passes to its child unchanged,
//! so it is a valid no-op layer, and the smallest translator that builds. To start a new
//! translator outside this tree, run `xlfs translator new NAME`: it writes a stand-alone crate
//! (this crate's manifest inherits from the workspace and builds only inside it). Then change
//! `TYPE`, declare options in `options!`, and add `async fn`s for the fops you change.
//!
//! A translator that treats a class of fops alike (every fop that modifies, every fop that may
//! change data...) should not list them by hand: a fop added to the table later would be
//! silently missing. Generate the overrides for the whole table with
//! `xlator_api::for_each_fop!` and decide by the fop's attributes (`Fop::modifies()`,
//! `Fop::may_change_data()`... from `Fop::attrs()`), as `examples/read-only` does, or write the
//! decision as one `match` over `Fop` with no `_` arm.

use xlator_api::{Init, Subvol, Translator};

xlator_api::options! {
    /// Options of `example/template` (none yet; add fields here, each with a doc comment).
    pub struct TemplateOptions {}
}

/// The translator's state: its children, plus whatever it needs.
pub struct Template {
    children: Vec<Subvol>,
}

impl Translator for Template {
    const TYPE: &'static str = "example/template";
    const DOC: &'static str =
        "A pass-through layer with no overrides; copy it to start a translator.";
    // Add `const KEEPS_FILE_DATA: bool = true;` once the translator is written, if it keeps
    // file data as stored (see the trait's docs): only then may FUSE passthrough read around it.
    type Options = TemplateOptions;

    fn init(init: Init<TemplateOptions>) -> Result<Self, String> {
        Ok(Template {
            children: init.children,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }
}

xlator_api::export_translators!(Template);
