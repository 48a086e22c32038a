//! The `include`/`exclude` options: which fops are traced.

use std::sync::atomic::{AtomicBool, Ordering};

use xlator_api::{Fop, FromOption, OptionSpec, Options};

/// A list of fop names, written `lookup, readv,writev` (commas and/or spaces).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FopList(pub Vec<Fop>);

impl FopList {
    /// Parses a list; an unknown name is an error naming it (and the closest fop name).
    pub fn parse(text: &str) -> Result<FopList, String> {
        let mut fops = Vec::new();
        for word in text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            let fop = Fop::from_name(word).ok_or_else(|| unknown_fop(word))?;
            if !fops.contains(&fop) {
                fops.push(fop);
            }
        }
        Ok(FopList(fops))
    }

    pub fn contains(&self, fop: Fop) -> bool {
        self.0.contains(&fop)
    }
}

fn unknown_fop(word: &str) -> String {
    let closest = Fop::ALL
        .iter()
        .map(|f| (strsim::jaro_winkler(word, f.name()), f.name()))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((score, name)) if score >= 0.8 => {
            format!("unknown fop {word:?} (did you mean {name:?}?)")
        }
        _ => {
            let all: Vec<&str> = Fop::ALL.iter().map(|f| f.name()).collect();
            format!("unknown fop {word:?}; fops are: {}", all.join(", "))
        }
    }
}

impl FromOption for FopList {
    fn from_option(opts: &Options, spec: &OptionSpec) -> Result<Self, String> {
        FopList::parse(opts.get(&spec.key).unwrap_or_default())
            .map_err(|e| format!("option {:?}: {e}", spec.key))
    }
}

/// Whether `fop` is traced: listed in `include` (or `include` is empty) and not in `exclude`.
pub fn selected(include: &FopList, exclude: &FopList, fop: Fop) -> bool {
    (include.0.is_empty() || include.contains(fop)) && !exclude.contains(fop)
}

/// The traced fops, one flag per fop, changed by reconfigure while fops run.
pub struct FopFilter(Box<[AtomicBool]>);

impl FopFilter {
    pub fn new(include: &FopList, exclude: &FopList) -> FopFilter {
        FopFilter(
            Fop::ALL
                .iter()
                .map(|&f| AtomicBool::new(selected(include, exclude, f)))
                .collect(),
        )
    }

    /// Replaces the selection. Fops in flight may see either selection.
    pub fn set(&self, include: &FopList, exclude: &FopList) {
        for &f in Fop::ALL {
            self.0[f.index()].store(selected(include, exclude, f), Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn traces(&self, fop: Fop) -> bool {
        self.0[fop.index()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> FopList {
        FopList::parse(s).expect("valid list")
    }

    #[test]
    fn parses_commas_and_spaces_without_duplicates() {
        assert_eq!(list(""), FopList(vec![]));
        assert_eq!(
            list(" lookup, readv,writev  readv "),
            FopList(vec![Fop::Lookup, Fop::Readv, Fop::Writev])
        );
    }

    #[test]
    fn unknown_names_are_named_with_a_suggestion() {
        let e = FopList::parse("lookup,wrtiev").expect_err("typo");
        assert_eq!(e, "unknown fop \"wrtiev\" (did you mean \"writev\"?)");
        let e = FopList::parse("frobnicate").expect_err("nonsense");
        assert!(
            e.starts_with("unknown fop \"frobnicate\"; fops are: lookup, stat,"),
            "{e}"
        );
    }

    #[test]
    fn include_then_exclude() {
        let (none, lw) = (list(""), list("lookup,writev"));
        assert!(Fop::ALL.iter().all(|&f| selected(&none, &none, f)));
        assert!(selected(&lw, &none, Fop::Writev) && !selected(&lw, &none, Fop::Readv));
        assert!(!selected(&lw, &list("writev"), Fop::Writev));
        assert!(
            !selected(&none, &list("stat"), Fop::Stat)
                && selected(&none, &list("stat"), Fop::Fstat)
        );
    }

    #[test]
    fn filter_follows_set() {
        let f = FopFilter::new(&list("lookup"), &list(""));
        assert!(f.traces(Fop::Lookup) && !f.traces(Fop::Stat));
        f.set(&list(""), &list("lookup"));
        assert!(!f.traces(Fop::Lookup) && f.traces(Fop::Stat));
    }

    #[test]
    fn option_errors_name_the_key() {
        let spec = OptionSpec::string("exclude", "");
        let mut o = Options::new();
        o.set("exclude", "lokup");
        let e = FopList::from_option(&o, &spec).expect_err("typo");
        assert!(
            e.starts_with("option \"exclude\": unknown fop \"lokup\""),
            "{e}"
        );
    }
}
