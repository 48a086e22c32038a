//! Where things are in a volfile's text. ron has no `Spanned<T>`, so once ron has accepted a
//! volfile this lexes the same text again and walks the tokens to find the line:column of each
//! volume, its name, option keys and subvolume entries. The lexer also catches unterminated
//! strings and comments and unbalanced brackets, which ron reports at a misleading place.
//!
//! Nothing here recurses or indexes unchecked: any input, however mangled, gives a result.

use super::Pos;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok<'a> {
    Open(char),
    Close(char),
    Colon,
    Comma,
    /// Any string literal (plain, raw, byte).
    Str,
    Ident(&'a str),
    /// Numbers, chars, `#`, `!` and anything else.
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    pos: Pos,
}

/// A lexical error, at the place that is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub pos: Pos,
    pub message: String,
}

struct Cursor<'a> {
    text: &'a str,
    off: usize,
    line: u32,
    col: u32,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        self.text.get(self.off..).unwrap_or("")
    }
    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn peek_at(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.off += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }
    fn bump_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let start = self.off;
        while self.peek().is_some_and(&f) {
            self.bump();
        }
        self.text.get(start..self.off).unwrap_or("")
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}
fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || "()[]{}:,\"'/".contains(c)
}
fn closer_of(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

/// Splits `text` into tokens; checks strings, comments and bracket balance.
fn lex(text: &str) -> Result<Vec<Token<'_>>, LexError> {
    let mut cur = Cursor {
        text,
        off: 0,
        line: 1,
        col: 1,
    };
    let mut out = Vec::new();
    let mut open: Vec<(char, Pos)> = Vec::new();
    while let Some(c) = cur.peek() {
        let pos = cur.pos();
        let tok = match c {
            _ if c.is_whitespace() => {
                cur.bump();
                continue;
            }
            '/' if cur.peek_at(1) == Some('/') => {
                cur.bump_while(|c| c != '\n');
                continue;
            }
            '/' if cur.peek_at(1) == Some('*') => {
                block_comment(&mut cur)?;
                continue;
            }
            '(' | '[' | '{' => {
                cur.bump();
                open.push((c, pos));
                Tok::Open(c)
            }
            ')' | ']' | '}' => {
                cur.bump();
                match open.pop() {
                    Some((o, _)) if closer_of(o) == c => Tok::Close(c),
                    Some((o, at)) => {
                        return Err(LexError {
                            pos,
                            message: format!(
                                "`{c}` does not close the `{o}` opened at {at}; a `{}` is \
                                 missing before it",
                                closer_of(o)
                            ),
                        });
                    }
                    None => {
                        return Err(LexError {
                            pos,
                            message: format!("unexpected `{c}`: nothing is open here; remove it"),
                        });
                    }
                }
            }
            ':' => {
                cur.bump();
                Tok::Colon
            }
            ',' => {
                cur.bump();
                Tok::Comma
            }
            '"' => {
                cur.bump();
                escaped_string(&mut cur, pos)?;
                Tok::Str
            }
            'b' if cur.peek_at(1) == Some('"') => {
                cur.bump();
                cur.bump();
                escaped_string(&mut cur, pos)?;
                Tok::Str
            }
            'b' if cur.peek_at(1) == Some('r') && raw_string_ahead(&cur, 2) => {
                cur.bump();
                cur.bump();
                raw_string(&mut cur, pos)?;
                Tok::Str
            }
            'r' if raw_string_ahead(&cur, 1) => {
                cur.bump();
                raw_string(&mut cur, pos)?;
                Tok::Str
            }
            'r' if cur.peek_at(1) == Some('#') && cur.peek_at(2).is_some_and(is_ident_char) => {
                cur.bump();
                cur.bump();
                Tok::Ident(cur.bump_while(is_ident_char))
            }
            'b' if cur.peek_at(1) == Some('\'') => {
                cur.bump();
                char_literal(&mut cur);
                Tok::Other
            }
            '\'' => {
                char_literal(&mut cur);
                Tok::Other
            }
            _ if is_ident_start(c) => Tok::Ident(cur.bump_while(is_ident_char)),
            _ => {
                cur.bump();
                cur.bump_while(|c| !is_delimiter(c));
                Tok::Other
            }
        };
        out.push(Token { tok, pos });
    }
    if let Some((o, at)) = open.pop() {
        return Err(LexError {
            pos: at,
            message: format!(
                "this `{o}` is never closed (is the file cut short?); add the matching `{}`",
                closer_of(o)
            ),
        });
    }
    Ok(out)
}

/// After `"` (or `b"`): up to and including the closing `"`.
fn escaped_string(cur: &mut Cursor<'_>, start: Pos) -> Result<(), LexError> {
    loop {
        match cur.bump() {
            Some('"') => return Ok(()),
            Some('\\') => {
                cur.bump();
            }
            Some(_) => {}
            None => {
                return Err(LexError {
                    pos: start,
                    message: "this string is never closed (or one before it lacks its closing \
                              quote); add the closing `\"`"
                        .to_owned(),
                });
            }
        }
    }
}

/// Whether `r`, `#`* and `"` start at char `n` after the cursor (`n` skips the `b` of `br`).
fn raw_string_ahead(cur: &Cursor<'_>, n: usize) -> bool {
    cur.rest().chars().skip(n).find(|&c| c != '#') == Some('"')
        && cur.rest().chars().skip(n).take_while(|&c| c == '#').count() < 256
}

/// At `#`* `"` after the `r`: up to and including the closing `"` and hashes.
fn raw_string(cur: &mut Cursor<'_>, start: Pos) -> Result<(), LexError> {
    let hashes = cur.bump_while(|c| c == '#').len();
    cur.bump(); // the opening quote
    let closing = format!("\"{}", "#".repeat(hashes));
    match cur.rest().find(&closing) {
        Some(i) => {
            let end = cur.off + i + closing.len();
            while cur.off < end && cur.bump().is_some() {}
            Ok(())
        }
        None => Err(LexError {
            pos: start,
            message: format!("this raw string is never closed; add the closing `{closing}`"),
        }),
    }
}

/// At `'`: a char literal such as `'a'`, `'\n'`, `'\u{1F600}'`. Lenient: if it does not look
/// like one, only the quote is taken (ron reports the real problem).
fn char_literal(cur: &mut Cursor<'_>) {
    cur.bump();
    let body: String = cur.rest().chars().take(12).collect();
    let len = if body.starts_with('\\') {
        body.char_indices()
            .skip(2)
            .find(|&(_, c)| c == '\'')
            .map(|(i, _)| i)
    } else {
        body.char_indices()
            .nth(1)
            .filter(|&(_, c)| c == '\'')
            .map(|(i, _)| i)
    };
    if let Some(len) = len {
        let end = cur.off + len + 1;
        while cur.off < end && cur.bump().is_some() {}
    }
}

/// At `/*`: up to and including the matching `*/` (block comments nest, as in ron).
fn block_comment(cur: &mut Cursor<'_>) -> Result<(), LexError> {
    let start = cur.pos();
    cur.bump();
    cur.bump();
    let mut depth = 1u32;
    while depth > 0 {
        match (cur.peek(), cur.peek_at(1)) {
            (Some('/'), Some('*')) => {
                cur.bump();
                cur.bump();
                depth += 1;
            }
            (Some('*'), Some('/')) => {
                cur.bump();
                cur.bump();
                depth -= 1;
            }
            (Some(_), _) => {
                cur.bump();
            }
            (None, _) => {
                return Err(LexError {
                    pos: start,
                    message: "this comment is never closed; add the closing `*/`".to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// The first lexical error of `text`, or whether it has no tokens at all.
pub(crate) fn check(text: &str) -> Result<bool, LexError> {
    lex(text).map(|t| t.is_empty())
}

/// The start of the first token at or after `pos`: ron's errors often start at the
/// whitespace before the offending token. `pos` itself if no token follows.
pub(crate) fn next_token_at(text: &str, pos: Pos) -> Pos {
    let mut cur = Cursor {
        text,
        off: 0,
        line: 1,
        col: 1,
    };
    while cur.pos() < pos && cur.bump().is_some() {}
    loop {
        match (cur.peek(), cur.peek_at(1)) {
            (Some(c), _) if c.is_whitespace() => {
                cur.bump();
            }
            (Some('/'), Some('/')) => {
                cur.bump_while(|c| c != '\n');
            }
            (Some('/'), Some('*')) => {
                if block_comment(&mut cur).is_err() {
                    return pos;
                }
            }
            (Some(_), _) => return cur.pos(),
            (None, _) => return pos,
        }
    }
}

/// Whether the first token is `{` (a common mistake: a volfile is a `( ... )` struct).
pub(crate) fn starts_with_brace(text: &str) -> bool {
    lex(text).is_ok_and(|t| t.first().is_some_and(|t| t.tok == Tok::Open('{')))
}

/// Positions in one volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VolumeLayout {
    /// The `(` of the volume.
    pub open: Pos,
    /// The value of `name`.
    pub name: Option<Pos>,
    /// Each option key, in order.
    pub option_keys: Vec<Pos>,
    /// Each subvolume entry, in order.
    pub subvolumes: Vec<Pos>,
}

/// Positions in a volfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The `[` of `volumes`.
    pub volumes_list: Option<Pos>,
    pub volumes: Vec<VolumeLayout>,
    /// The value of `top`.
    pub top: Option<Pos>,
}

/// Positions of the parts of a volfile ron has accepted. `None` if the tokens do not have the
/// expected shape (which would be a bug here, not in the file).
pub(crate) fn layout(text: &str) -> Option<Layout> {
    let tokens = lex(text).ok()?;
    let mut w = Walker { t: &tokens, i: 0 };
    w.skip_attributes();
    let mut out = Layout::default();
    w.struct_fields(|w, field| {
        match field {
            "volumes" => {
                out.volumes_list = Some(w.expect_open('[')?);
                w.list(|w| {
                    out.volumes.push(w.volume()?);
                    Some(())
                })?;
            }
            "top" => {
                out.top = Some(w.peek()?.pos);
                w.skip_value()?;
            }
            _ => w.skip_value()?,
        }
        Some(())
    })?;
    Some(out)
}

struct Walker<'t, 'a> {
    t: &'t [Token<'a>],
    i: usize,
}

impl<'a> Walker<'_, 'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.t.get(self.i).copied()
    }
    fn next(&mut self) -> Option<Token<'a>> {
        let t = self.peek()?;
        self.i += 1;
        Some(t)
    }
    fn eat(&mut self, tok: Tok<'_>) -> bool {
        if self.peek().is_some_and(|t| t.tok == tok) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect_open(&mut self, c: char) -> Option<Pos> {
        let t = self.next()?;
        (t.tok == Tok::Open(c)).then_some(t.pos)
    }

    /// `#![enable(...)]` extension attributes.
    fn skip_attributes(&mut self) {
        while self.peek().is_some_and(|t| t.tok == Tok::Other)
            && self
                .t
                .get(self.i + 1)
                .is_some_and(|t| t.tok == Tok::Open('['))
        {
            self.i += 1;
            if self.skip_value().is_none() {
                return;
            }
        }
    }

    /// One value of any shape; brackets are balanced (the lexer checked), so skipping a group
    /// is counting.
    fn skip_value(&mut self) -> Option<()> {
        if matches!(self.peek()?.tok, Tok::Ident(_))
            && self
                .t
                .get(self.i + 1)
                .is_some_and(|t| t.tok == Tok::Open('('))
        {
            self.i += 1;
        }
        let mut depth = 0usize;
        loop {
            match self.next()?.tok {
                Tok::Open(_) => depth += 1,
                Tok::Close(_) => depth = depth.checked_sub(1)?,
                _ => {}
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    /// `Name? ( field: value, ... )`, calling `f` at each value; returns the `(` position.
    fn struct_fields(
        &mut self,
        mut f: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<Pos> {
        if matches!(self.peek()?.tok, Tok::Ident(_)) {
            self.i += 1;
        }
        let open = self.expect_open('(')?;
        loop {
            if self.eat(Tok::Close(')')) {
                return Some(open);
            }
            let Tok::Ident(field) = self.next()?.tok else {
                return None;
            };
            if !self.eat(Tok::Colon) {
                return None;
            }
            f(self, field)?;
            self.eat(Tok::Comma);
        }
    }

    /// After `[`: `item, ...]`.
    fn list(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        loop {
            if self.eat(Tok::Close(']')) {
                return Some(());
            }
            item(self)?;
            self.eat(Tok::Comma);
        }
    }

    fn volume(&mut self) -> Option<VolumeLayout> {
        let mut v = VolumeLayout::default();
        v.open = self.struct_fields(|w, field| {
            match field {
                "name" => {
                    v.name = Some(w.peek()?.pos);
                    w.skip_value()?;
                }
                "options" => {
                    w.expect_open('{')?;
                    loop {
                        if w.eat(Tok::Close('}')) {
                            break;
                        }
                        v.option_keys.push(w.peek()?.pos);
                        w.skip_value()?;
                        if !w.eat(Tok::Colon) {
                            return None;
                        }
                        w.skip_value()?;
                        w.eat(Tok::Comma);
                    }
                }
                "subvolumes" => {
                    w.expect_open('[')?;
                    w.list(|w| {
                        v.subvolumes.push(w.peek()?.pos);
                        w.skip_value()
                    })?;
                }
                _ => w.skip_value()?,
            }
            Some(())
        })?;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn positions_skip_comments_and_tricky_strings() {
        let text = r##"#![enable(implicit_some)]
/* a ( block /* nested ) */ comment */
Volfile(
  // a line comment with "quotes" and (parens
  volumes: [
    Volume(name: "a(", r#type: r"x\y", options: { "k": "v)", r#"k2"#: '(' }),
    (name: "b", type: "t", subvolumes: [ "a(" , ],),
  ],
  top: "b",
)"##;
        let l = layout(text).expect("layout");
        assert_eq!(l.volumes_list, Some(p(5, 12)));
        assert_eq!(l.top, Some(p(9, 8)));
        assert_eq!(l.volumes[0].open, p(6, 11));
        assert_eq!(l.volumes[0].name, Some(p(6, 18)));
        assert_eq!(l.volumes[0].option_keys, vec![p(6, 51), p(6, 62)]);
        assert_eq!(l.volumes[1].open, p(7, 5));
        assert_eq!(l.volumes[1].subvolumes, vec![p(7, 42)]);
    }

    #[test]
    fn lexical_errors_point_at_the_cause() {
        let e = check("(volumes: [(name: \"a, type: \"t\")])").expect_err("lexical error");
        assert_eq!(e.pos, p(1, 31));
        let e = check("(volumes: [(name: \"a\")]").expect_err("lexical error");
        assert_eq!((e.pos, e.message.contains("never closed")), (p(1, 1), true));
        let e = check("(volumes: [(name: \"a\"])").expect_err("lexical error");
        assert_eq!(e.pos, p(1, 22));
        let e = check("( /* x").expect_err("lexical error");
        assert_eq!(e.pos, p(1, 3));
        assert_eq!(check(" // nothing\n /* */ "), Ok(true));
    }

    #[test]
    fn next_token_skips_blanks_and_comments() {
        let text = "(a: /* c */\n  // d\n  5)";
        assert_eq!(next_token_at(text, p(1, 4)), p(3, 3));
        assert_eq!(next_token_at(text, p(1, 2)), p(1, 2));
        assert_eq!(next_token_at(text, p(3, 4)), p(3, 4));
        assert_eq!(next_token_at("x  ", p(1, 2)), p(1, 2));
    }
}
