//! Whether to write ANSI colours: only to a terminal, and never when `NO_COLOR` is set to
//! anything but the empty string (<https://no-color.org>). Logs and reports redirected to a file
//! or a pipe stay plain text.

use std::io::IsTerminal;

/// Colours for a stream that is (or is not) a terminal.
pub fn wanted(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
