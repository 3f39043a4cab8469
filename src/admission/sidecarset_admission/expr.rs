//! A syntax check for resourcesPolicy expressions (Kruise `pkg/util/calculator`): numbers,
//! percentages (`50%`), quantities (`50m`, `200Mi`), the one variable (`cpu` or `memory`, any
//! case), `+ - * /`, unary minus, parentheses and `max(a, b)` / `min(a, b)`. Validation only needs
//! to know whether Kruise could evaluate the expression; the evaluation itself happens at injection.

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number,
    Quantity(String),
    Ident(String),
    Op(char),
}

fn lex(input: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let number: String = chars[start..i].iter().collect();
            if number.matches('.').count() > 1 {
                return Err(format!("invalid number {number:?}"));
            }
            if chars.get(i) == Some(&'%') {
                i += 1;
                tokens.push(Token::Number);
                continue;
            }
            let unit_start = i;
            while i < chars.len() && chars[i].is_alphabetic() {
                i += 1;
            }
            if unit_start == i {
                tokens.push(Token::Number);
            } else {
                let text: String = chars[start..i].iter().collect();
                if crate::api::quantity::parse(&text).is_none() {
                    return Err(format!("invalid quantity {text:?}"));
                }
                tokens.push(Token::Quantity(text));
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect::<String>().to_lowercase()));
        } else if "+-*/(),".contains(c) {
            tokens.push(Token::Op(c));
            i += 1;
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    variable: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Result<(), String> {
        self.term()?;
        while self.eat('+') || self.eat('-') {
            self.term()?;
        }
        Ok(())
    }

    fn term(&mut self) -> Result<(), String> {
        self.factor()?;
        while self.eat('*') || self.eat('/') {
            self.factor()?;
        }
        Ok(())
    }

    fn factor(&mut self) -> Result<(), String> {
        if self.eat('-') {
            return self.factor();
        }
        let token = self.peek().cloned().ok_or("unexpected end of expression")?;
        self.pos += 1;
        match token {
            Token::Number | Token::Quantity(_) => Ok(()),
            Token::Op('(') => {
                self.expr()?;
                if self.eat(')') { Ok(()) } else { Err("missing ')'".into()) }
            }
            Token::Ident(name) if name == "max" || name == "min" => {
                if !self.eat('(') {
                    return Err(format!("{name} needs arguments in parentheses"));
                }
                self.expr()?;
                if !self.eat(',') {
                    return Err(format!("{name} needs two arguments"));
                }
                self.expr()?;
                if self.eat(')') { Ok(()) } else { Err("missing ')'".into()) }
            }
            Token::Ident(name) if name == self.variable => Ok(()),
            Token::Ident(name) => Err(format!("undefined variable {name:?}")),
            Token::Op(op) => Err(format!("unexpected {op:?}")),
        }
    }
}

/// Does `expr` parse with `variable` (`cpu` or `memory`) as its only variable?
pub fn check(expr: &str, variable: &str) -> Result<(), String> {
    let tokens = lex(expr)?;
    if tokens.is_empty() {
        return Err("empty expression".into());
    }
    let mut parser = Parser { tokens: &tokens, pos: 0, variable };
    parser.expr()?;
    match parser.peek() {
        None => Ok(()),
        Some(t) => Err(format!("unexpected {t:?} after the expression")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(check(e, v), Ok(()), "{e}");
        }
    }

    #[test]
    fn rejects_broken_expressions() {
        for e in ["undefined_var", "cpu +", "max(cpu)", "(cpu", "cpu cpu", "cpu $ 2", "", "memory"] {
            assert!(check(e, "cpu").is_err(), "{e}");
        }
    }
}
