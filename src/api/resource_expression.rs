//! `resourcesPolicy` expressions (Kruise's `pkg/util/calculator` semantics, our own grammar): the
//! one parser behind both SidecarSet validation ([`check`]) and injection ([`Expression`]).
//!
//! `+ - * /` with the usual precedence, parentheses, unary minus, `max(a, b)`, `min(a, b)`, plain
//! numbers, percentages (`50%` is 0.5) and Kubernetes quantities (`50m`, `200Mi`, `1Gi`), plus one
//! variable (`cpu` or `memory`). Names are case-insensitive, as in Kruise (`CPU/2`).
//!
//! Values are plain `f64` in base units (cores, bytes): a quantity and a number mix freely, as in
//! Kruise's documented `max(0.5, 0.5*cpu)`.

use std::fmt;

use crate::api::quantity;

#[derive(Debug, Clone, PartialEq)]
pub struct CalcError(pub String);

impl fmt::Display for CalcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parentheses and function calls nest at most this deep: the parser recurses once per level,
/// and an expression is request text (a SidecarSet can carry a megabyte of `(`).
const MAX_DEPTH: usize = 64;

/// An expression as injection evaluates it, parsed once: its tree, or why it does not parse (an
/// error reported when it is evaluated, as parsing it then would report it).
#[derive(Debug)]
pub struct Expression(Result<Expr, CalcError>);

impl Expression {
    /// Parse `expr` for injection: its variable is `memory` when that word is in it, else `cpu`.
    pub fn for_injection(expr: &str) -> Expression {
        let variable = if has_word(expr, "memory") { "memory" } else { "cpu" };
        Expression(parse(expr, variable))
    }

    /// Evaluate with the variable bound to `value` (base units). `max` and `min` take any number
    /// of arguments here; [`check`] is what holds SidecarSets to Kruise's two.
    pub fn evaluate(&self, value: f64) -> Result<f64, CalcError> {
        let result = self.0.as_ref().map_err(Clone::clone)?.eval(value)?;
        if !result.is_finite() {
            return Err(CalcError("the result is not a finite number".into()));
        }
        Ok(result)
    }
}

fn has_word(expr: &str, word: &str) -> bool {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w.eq_ignore_ascii_case(word))
}

/// Would Kruise accept `expr` with `variable` (`cpu` or `memory`) as its only variable? It must
/// parse, and `max` / `min` take exactly two arguments (Kruise's grammar has no other form).
pub fn check(expr: &str, variable: &str) -> Result<(), CalcError> {
    parse(expr, variable)?.check_calls()
}

/// Parse a Kubernetes quantity (`500m`, `1.5`, `128Mi`, `1e3`, `2G`) into base units.
pub fn parse_quantity(s: &str) -> Result<f64, CalcError> {
    quantity::parse_f64(s).ok_or_else(|| CalcError(format!("{:?} is not a quantity", s.trim())))
}

/// A parsed expression; the variable is the one it was parsed with.
#[derive(Debug)]
enum Expr {
    Num(f64),
    Var,
    Neg(Box<Expr>),
    Binary(char, Box<Expr>, Box<Expr>),
    Call { max: bool, name: String, args: Vec<Expr> },
}

impl Expr {
    fn eval(&self, value: f64) -> Result<f64, CalcError> {
        Ok(match self {
            Expr::Num(n) => *n,
            Expr::Var => value,
            Expr::Neg(e) => -e.eval(value)?,
            Expr::Binary(op, l, r) => {
                let (l, r) = (l.eval(value)?, r.eval(value)?);
                match op {
                    '+' => l + r,
                    '-' => l - r,
                    '*' => l * r,
                    _ if r == 0.0 => return Err(CalcError("division by zero".into())),
                    _ => l / r,
                }
            }
            Expr::Call { max, args, .. } => {
                let mut values = args.iter().map(|a| a.eval(value));
                let first = values.next().unwrap_or(Ok(0.0))?;
                values.try_fold(first, |acc, v| {
                    Ok::<_, CalcError>(if *max { acc.max(v?) } else { acc.min(v?) })
                })?
            }
        })
    }

    fn check_calls(&self) -> Result<(), CalcError> {
        match self {
            Expr::Num(_) | Expr::Var => Ok(()),
            Expr::Neg(e) => e.check_calls(),
            Expr::Binary(_, l, r) => l.check_calls().and_then(|()| r.check_calls()),
            Expr::Call { name, args, .. } if args.len() != 2 => {
                Err(CalcError(format!("{name} needs two arguments, not {}", args.len())))
            }
            Expr::Call { args, .. } => args.iter().try_for_each(Expr::check_calls),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    Ident(String),
    Op(char),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Num(n) => write!(f, "number {n}"),
            Token::Ident(i) => write!(f, "{i:?}"),
            Token::Op(c) => write!(f, "{c:?}"),
        }
    }
}

fn tokenize(expr: &str) -> Result<Vec<Token>, CalcError> {
    let bytes = expr.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            let number = &expr[start..i];
            let n: f64 = number.parse().map_err(|_| CalcError(format!("{number:?} is not a number")))?;
            // A suffix glued to the number: `%`, or a quantity suffix (`m`, `Mi`, `e3`).
            if i < bytes.len() && bytes[i] == b'%' {
                i += 1;
                tokens.push(Token::Num(n / 100.0));
                continue;
            }
            let suffix_start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || (bytes[i] == b'-' && i > suffix_start && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            if i == suffix_start {
                tokens.push(Token::Num(n));
            } else {
                let text = &expr[start..i];
                tokens.push(Token::Num(quantity::parse_f64(text).ok_or_else(|| {
                    CalcError(format!(
                        "{text:?} is not a quantity (unknown suffix {:?})",
                        &expr[suffix_start..i]
                    ))
                })?));
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token::Ident(expr[start..i].to_ascii_lowercase()));
        } else if "+-*/(),".contains(c) {
            tokens.push(Token::Op(c));
            i += 1;
        } else {
            return Err(CalcError(format!("unexpected character {c:?} at position {i}")));
        }
    }
    if tokens.is_empty() {
        return Err(CalcError("empty expression".into()));
    }
    Ok(tokens)
}

fn parse(expr: &str, variable: &str) -> Result<Expr, CalcError> {
    let tokens = tokenize(expr)?;
    let mut parser = Parser { tokens: &tokens, pos: 0, variable, depth: 0 };
    let parsed = parser.expr()?;
    if let Some(extra) = tokens.get(parser.pos) {
        return Err(CalcError(format!("unexpected {extra} after a complete expression")));
    }
    Ok(parsed)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    variable: &'a str,
    /// Open parentheses and calls around the current position.
    depth: usize,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<char> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(c)) => Some(*c),
            _ => None,
        }
    }

    fn expect(&mut self, op: char) -> Result<(), CalcError> {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(CalcError(match self.tokens.get(self.pos) {
                Some(t) => format!("expected {op:?}, found {t}"),
                None => format!("expected {op:?} at the end of the expression"),
            }))
        }
    }

    fn expr(&mut self) -> Result<Expr, CalcError> {
        let mut acc = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.pos += 1;
            acc = Expr::Binary(op, Box::new(acc), Box::new(self.term()?));
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<Expr, CalcError> {
        let mut acc = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek_op() {
            self.pos += 1;
            acc = Expr::Binary(op, Box::new(acc), Box::new(self.unary()?));
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<Expr, CalcError> {
        // A run of signs is a loop, not recursion: `------1` cannot exhaust the stack.
        let mut negative = false;
        while let Some(sign @ ('-' | '+')) = self.peek_op() {
            self.pos += 1;
            negative ^= sign == '-';
        }
        let primary = self.primary()?;
        Ok(if negative { Expr::Neg(Box::new(primary)) } else { primary })
    }

    /// `inner` one nesting level deeper (a parenthesis or a call).
    fn nested<T>(&mut self, inner: impl FnOnce(&mut Self) -> Result<T, CalcError>) -> Result<T, CalcError> {
        if self.depth == MAX_DEPTH {
            return Err(CalcError(format!("parentheses and calls nest more than {MAX_DEPTH} deep")));
        }
        self.depth += 1;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    fn primary(&mut self) -> Result<Expr, CalcError> {
        let Some(token) = self.tokens.get(self.pos) else {
            return Err(CalcError("the expression ends too early".into()));
        };
        self.pos += 1;
        match token {
            Token::Num(n) => Ok(Expr::Num(*n)),
            Token::Op('(') => self.nested(|p| {
                let inner = p.expr()?;
                p.expect(')')?;
                Ok(inner)
            }),
            Token::Ident(name) if self.peek_op() == Some('(') => {
                let max = match name.as_str() {
                    "max" => true,
                    "min" => false,
                    other => {
                        return Err(CalcError(format!(
                            "unknown function {other:?} (max and min are supported)"
                        )));
                    }
                };
                self.pos += 1;
                self.nested(|p| {
                    let mut args = vec![p.expr()?];
                    while p.peek_op() == Some(',') {
                        p.pos += 1;
                        args.push(p.expr()?);
                    }
                    p.expect(')')?;
                    Ok(Expr::Call { max, name: name.clone(), args })
                })
            }
            Token::Ident(name) if name == self.variable => Ok(Expr::Var),
            Token::Ident(name) => Err(CalcError(format!("undefined variable {name:?}"))),
            Token::Op(c) => Err(CalcError(format!("unexpected {c:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expr` evaluated with `variable` bound to `value`.
    fn evaluate(expr: &str, variable: &str, value: f64) -> Result<f64, CalcError> {
        Expression(parse(expr, variable)).evaluate(value)
    }

    /// Injection reads `memory` when the word is in the expression, else `cpu`.
    #[test]
    fn injection_picks_the_variable_by_word() {
        let mi = 1048576.0;
        let memory = Expression::for_injection("max(Memory*50%, 100Mi)");
        assert!(close(memory.evaluate(400.0 * mi).unwrap(), 200.0 * mi));
        assert!(close(Expression::for_injection("cpu * 2").evaluate(0.5).unwrap(), 1.0));
        assert!(close(Expression::for_injection("1Gi").evaluate(3.0).unwrap(), 1073741824.0));
        let both = Expression::for_injection("memory + cpu").evaluate(1.0).unwrap_err();
        assert_eq!(both.0, "undefined variable \"cpu\"");
        // The parse error is kept and given on every evaluation.
        let broken = Expression::for_injection("cpu *");
        assert_eq!(broken.evaluate(1.0), broken.evaluate(2.0));
        assert!(broken.evaluate(1.0).unwrap_err().0.contains("ends too early"));
    }

    #[test]
    fn word_detection() {
        assert!(has_word("max(memory*50%, 100Mi)", "memory"));
        assert!(!has_word("max(cpu*50%, 50m)", "memory"));
        assert!(!has_word("memoryx", "memory"));
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn documented_examples() {
        // Kruise's docs: sum of limits 600m, `max(cpu*50%, 50m)` gives 300m.
        assert!(close(evaluate("max(cpu*50%, 50m)", "cpu", 0.6).unwrap(), 0.3));
        assert!(close(evaluate("max(cpu*50%, 50m)", "cpu", 0.05).unwrap(), 0.05));
        assert!(close(
            evaluate("min(max(max(max(0.5,0.5*cpu),cpu-1.0),cpu-1.0),3.0)", "cpu", 10.5).unwrap(),
            3.0
        ));
        assert!(close(
            evaluate("max(memory*50%, 100Mi)", "memory", 400.0 * 1048576.0).unwrap(),
            200.0 * 1048576.0
        ));
        assert!(close(evaluate("200Mi", "memory", 0.0).unwrap(), 200.0 * 1048576.0));
    }

    #[test]
    fn precedence_parentheses_and_unary_minus() {
        assert!(close(evaluate("1 + 2 * 3", "cpu", 0.0).unwrap(), 7.0));
        assert!(close(evaluate("(1 + 2) * 3", "cpu", 0.0).unwrap(), 9.0));
        assert!(close(evaluate("-1 + 4 / 2", "cpu", 0.0).unwrap(), 1.0));
        assert!(close(evaluate("10 - 4 - 3", "cpu", 0.0).unwrap(), 3.0));
        assert!(close(evaluate("min(3, 1, 2)", "cpu", 0.0).unwrap(), 1.0));
    }

    #[test]
    fn errors_are_explained() {
        assert!(evaluate("cpu *", "cpu", 1.0).unwrap_err().0.contains("ends too early"));
        assert!(evaluate("memory", "cpu", 1.0).unwrap_err().0.contains("undefined variable"));
        assert!(evaluate("avg(1)", "cpu", 1.0).unwrap_err().0.contains("unknown function"));
        assert!(evaluate("1/0", "cpu", 1.0).unwrap_err().0.contains("division by zero"));
        assert!(evaluate("5Qi", "cpu", 1.0).is_err());
        assert!(evaluate("", "cpu", 1.0).is_err());
        assert!(evaluate("1 2", "cpu", 1.0).is_err());
    }

    /// What SidecarSet validation accepts and refuses (Kruise's grammar: `max`/`min` of two).
    #[test]
    fn accepts_kruise_examples() {
        for (e, v) in [
            ("cpu", "cpu"),
            ("cpu * 2", "cpu"),
            ("max(cpu, 200m)", "cpu"),
            ("min(max(max(max(0.5,0.5*cpu),cpu-1.0),cpu-1.0),3.0)", "cpu"),
            ("max(min(2*cpu,-cpu+3.0),2*cpu-3.0)", "cpu"),
            ("memory + 100Mi", "memory"),
            ("0.5 * memory + max(0, memory-2Gi)", "memory"),
            ("max(cpu*50%, 50m)", "cpu"),
            ("CPU/2", "cpu"),
            ("Max(CPU, 1e3)", "cpu"),
        ] {
            assert_eq!(check(e, v), Ok(()), "{e}");
        }
    }

    #[test]
    fn rejects_broken_expressions() {
        for e in [
            "undefined_var",
            "cpu +",
            "max(cpu)",
            "max(cpu, 1, 2)",
            "(cpu",
            "cpu cpu",
            "cpu $ 2",
            "",
            "memory",
        ] {
            assert!(check(e, "cpu").is_err(), "{e}");
        }
    }

    /// What validation accepts, injection evaluates the same way (names in any case).
    #[test]
    fn names_are_case_insensitive_when_evaluated_too() {
        assert!(close(evaluate("MAX(CPU*50%, 50m)", "cpu", 0.6).unwrap(), 0.3));
    }

    /// Request text cannot recurse the parser off its stack.
    #[test]
    fn deep_nesting_is_a_clear_error() {
        let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(evaluate(&deep, "cpu", 1.0).unwrap_err().0.contains("nest more than 64 deep"));
        let calls = format!("{}1{}", "max(".repeat(100_000), ", 1)".repeat(100_000));
        assert!(check(&calls, "cpu").unwrap_err().0.contains("nest more than 64 deep"));
        let signs = format!("{}1", "-".repeat(100_001));
        assert!(close(evaluate(&signs, "cpu", 1.0).unwrap(), -1.0));
        let fine = format!("{}cpu{}", "(".repeat(64), ")".repeat(64));
        assert!(close(evaluate(&fine, "cpu", 2.0).unwrap(), 2.0));
    }

    #[test]
    fn quantities() {
        assert!(close(parse_quantity("500m").unwrap(), 0.5));
        assert!(close(parse_quantity("1Gi").unwrap(), 1073741824.0));
        assert!(close(parse_quantity("129e6").unwrap(), 129e6));
        assert!(close(parse_quantity("2").unwrap(), 2.0));
        assert!(parse_quantity("lots").is_err());
    }
}
