//! A small arithmetic evaluator for `resourcesPolicy` expressions (Kruise's `pkg/util/calculator`
//! semantics, our own grammar): `+ - * /` with the usual precedence, parentheses, unary minus,
//! `max(a, b, ...)`, `min(...)`, plain numbers, percentages (`50%` is 0.5) and Kubernetes quantities
//! (`50m`, `200Mi`, `1Gi`), plus one variable (`cpu` or `memory`).
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

/// Evaluate `expr` with `variable` (`cpu` or `memory`) bound to `value` (base units).
pub fn evaluate(expr: &str, variable: &str, value: f64) -> Result<f64, CalcError> {
    let tokens = tokenize(expr)?;
    let mut parser = Parser { tokens: &tokens, pos: 0, variable, value };
    let result = parser.expr()?;
    if parser.pos != tokens.len() {
        return Err(CalcError(format!("unexpected {} after a complete expression", tokens[parser.pos])));
    }
    if !result.is_finite() {
        return Err(CalcError("the result is not a finite number".into()));
    }
    Ok(result)
}

/// Parse a Kubernetes quantity (`500m`, `1.5`, `128Mi`, `1e3`, `2G`) into base units.
pub fn parse_quantity(s: &str) -> Result<f64, CalcError> {
    quantity::parse(s).map(|q| q.as_f64()).ok_or_else(|| CalcError(format!("{:?} is not a quantity", s.trim())))
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
                && (bytes[i].is_ascii_alphanumeric() || (bytes[i] == b'-' && i > suffix_start && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            if i == suffix_start {
                tokens.push(Token::Num(n));
            } else {
                let text = &expr[start..i];
                tokens.push(Token::Num(
                    quantity::parse(text)
                        .map(|q| q.as_f64())
                        .ok_or_else(|| CalcError(format!("{text:?} is not a quantity (unknown suffix {:?})", &expr[suffix_start..i])))?,
                ));
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token::Ident(expr[start..i].to_owned()));
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

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    variable: &'a str,
    value: f64,
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

    fn expr(&mut self) -> Result<f64, CalcError> {
        let mut acc = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.pos += 1;
            let rhs = self.term()?;
            acc = if op == '+' { acc + rhs } else { acc - rhs };
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<f64, CalcError> {
        let mut acc = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek_op() {
            self.pos += 1;
            let rhs = self.unary()?;
            if op == '*' {
                acc *= rhs;
            } else if rhs == 0.0 {
                return Err(CalcError("division by zero".into()));
            } else {
                acc /= rhs;
            }
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<f64, CalcError> {
        match self.peek_op() {
            Some('-') => {
                self.pos += 1;
                Ok(-self.unary()?)
            }
            Some('+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<f64, CalcError> {
        let Some(token) = self.tokens.get(self.pos) else {
            return Err(CalcError("the expression ends too early".into()));
        };
        self.pos += 1;
        match token {
            Token::Num(n) => Ok(*n),
            Token::Op('(') => {
                let v = self.expr()?;
                self.expect(')')?;
                Ok(v)
            }
            Token::Ident(name) if self.peek_op() == Some('(') => {
                let is_max = match name.as_str() {
                    "max" => true,
                    "min" => false,
                    other => return Err(CalcError(format!("unknown function {other:?} (max and min are supported)"))),
                };
                self.pos += 1;
                let mut acc = self.expr()?;
                while self.peek_op() == Some(',') {
                    self.pos += 1;
                    let v = self.expr()?;
                    acc = if is_max { acc.max(v) } else { acc.min(v) };
                }
                self.expect(')')?;
                Ok(acc)
            }
            Token::Ident(name) if name == self.variable => Ok(self.value),
            Token::Ident(name) => Err(CalcError(format!("unknown variable {name:?} (this expression can use {:?})", self.variable))),
            Token::Op(c) => Err(CalcError(format!("unexpected {c:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn documented_examples() {
        // Kruise's docs: sum of limits 600m, `max(cpu*50%, 50m)` gives 300m.
        assert!(close(evaluate("max(cpu*50%, 50m)", "cpu", 0.6).unwrap(), 0.3));
        assert!(close(evaluate("max(cpu*50%, 50m)", "cpu", 0.05).unwrap(), 0.05));
        assert!(close(evaluate("min(max(max(max(0.5,0.5*cpu),cpu-1.0),cpu-1.0),3.0)", "cpu", 10.5).unwrap(), 3.0));
        assert!(close(evaluate("max(memory*50%, 100Mi)", "memory", 400.0 * 1048576.0).unwrap(), 200.0 * 1048576.0));
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
        assert!(evaluate("memory", "cpu", 1.0).unwrap_err().0.contains("unknown variable"));
        assert!(evaluate("avg(1)", "cpu", 1.0).unwrap_err().0.contains("unknown function"));
        assert!(evaluate("1/0", "cpu", 1.0).unwrap_err().0.contains("division by zero"));
        assert!(evaluate("5Qi", "cpu", 1.0).is_err());
        assert!(evaluate("", "cpu", 1.0).is_err());
        assert!(evaluate("1 2", "cpu", 1.0).is_err());
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
