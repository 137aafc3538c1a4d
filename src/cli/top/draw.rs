//! Drawing `headroom top`'s [`Screen`] with ratatui: the title line, the
//! memory lines, the GPU, job and rule panels, the process table (its
//! header marking the sort column) and the footer, top to bottom; the help
//! over it when asked for. No colours: emphasis is bold and reverse video
//! only, which every terminal shows and `NO_COLOR` users accept.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table};

use super::view::{Column, Screen};

/// Each panel's lines are cut to this many (its title not counted).
const MAX_GPU_LINES: usize = 8;
const MAX_JOB_LINES: usize = 7;
const MAX_RULE_LINES: usize = 6;

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

fn reversed() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}

/// A panel: its title in bold, then its lines, at most `max`.
fn panel<'a>(title: &'a str, lines: &'a [String], max: usize) -> Vec<Line<'a>> {
    let mut out = vec![Line::styled(title, bold())];
    out.extend(lines.iter().take(max).map(|l| Line::raw(l.as_str())));
    if lines.len() > max {
        out.push(Line::raw(format!("… {} more lines", lines.len() - max)));
    }
    out
}

/// Draw `screen` with the table scrolled to `scroll`; returns how many
/// table rows fit (a page, for scrolling) and the scroll actually used
/// (kept within the rows).
pub fn draw(frame: &mut Frame, screen: &Screen, scroll: usize) -> (usize, usize) {
    let area = frame.area();
    let memory: Vec<Line> = screen
        .memory
        .iter()
        .map(|l| Line::raw(l.as_str()))
        .collect();
    let gpus = screen
        .gpus
        .as_ref()
        .map(|g| panel("GPUs", g, MAX_GPU_LINES))
        .unwrap_or_default();
    let jobs = if screen.jobs.is_empty() {
        Vec::new()
    } else {
        panel("Jobs", &screen.jobs, MAX_JOB_LINES)
    };
    let rules = if screen.rules.is_empty() {
        Vec::new()
    } else {
        panel("Rules", &screen.rules, MAX_RULE_LINES)
    };
    let height = |lines: &[Line]| u16::try_from(lines.len()).unwrap_or(u16::MAX);
    let [title, mem, gpu, job, rule, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(height(&memory)),
        Constraint::Length(height(&gpus)),
        Constraint::Length(height(&jobs)),
        Constraint::Length(height(&rules)),
        Constraint::Min(2),
        Constraint::Length(1),
    ])
    .areas(area);

    frame.render_widget(
        Paragraph::new(Line::raw(screen.title.as_str())).style(reversed()),
        title,
    );
    frame.render_widget(Paragraph::new(memory), mem);
    frame.render_widget(Paragraph::new(gpus), gpu);
    frame.render_widget(Paragraph::new(jobs), job);
    frame.render_widget(Paragraph::new(rules), rule);

    // The header takes one line.
    let page = usize::from(table.height.saturating_sub(1)).max(1);
    let scroll = scroll.min(screen.rows.len().saturating_sub(page));
    let widths: Vec<Constraint> = Column::ALL
        .iter()
        .map(|c| c.width().map_or(Constraint::Fill(1), Constraint::Length))
        .collect();
    let cell = |column: Column, text: String| {
        let line = Line::raw(text);
        Cell::from(if column.right_aligned() {
            line.right_aligned()
        } else {
            line
        })
    };
    let header = Row::new(Column::ALL.iter().enumerate().map(|(i, c)| {
        let style = if i == screen.sorted_column {
            bold().add_modifier(Modifier::REVERSED)
        } else {
            bold()
        };
        let line = Line::from(Span::styled(c.title(), style));
        Cell::from(if c.right_aligned() {
            line.right_aligned()
        } else {
            line
        })
    }));
    let rows = screen.rows.iter().skip(scroll).take(page).map(|r| {
        let row = Row::new(
            Column::ALL
                .iter()
                .zip(&r.cells)
                .map(|(c, text)| cell(*c, text.clone())),
        );
        if r.flagged { row.style(bold()) } else { row }
    });
    frame.render_widget(Table::new(rows, widths).header(header), table);

    let footer_style = if screen.alert {
        reversed()
    } else {
        Style::default()
    };
    frame.render_widget(
        Paragraph::new(Line::raw(screen.footer.as_str())).style(footer_style),
        footer,
    );

    if let Some(help) = &screen.help {
        let width = help
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .saturating_add(4);
        let w = u16::try_from(width).unwrap_or(u16::MAX).min(area.width);
        let h = u16::try_from(help.len() + 2)
            .unwrap_or(u16::MAX)
            .min(area.height);
        let popup = Rect {
            x: area.x + (area.width - w) / 2,
            y: area.y + (area.height - h) / 2,
            width: w,
            height: h,
        };
        frame.render_widget(Clear, popup);
        frame.render_widget(
            Paragraph::new(
                help.iter()
                    .map(|l| Line::raw(l.as_str()))
                    .collect::<Vec<_>>(),
            )
            .block(Block::default().borders(Borders::ALL).title(" help ")),
            popup,
        );
    }
    (page, scroll)
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::super::view::tests::fixture;
    use super::super::view::{Key, ViewState, screen};
    use super::*;
    use crate::model::Timestamp;

    /// The fixture drawn on a `width`×`height` terminal, as lines of text.
    fn render(state: &ViewState, width: u16, height: u16) -> (Vec<String>, usize) {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        let s = screen(&fixture(), state, Timestamp(1_795_319_494_000));
        let mut page = 0;
        terminal
            .draw(|f| page = draw(f, &s, state.scroll).0)
            .unwrap();
        let buffer = terminal.backend().buffer();
        let lines = (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect();
        (lines, page)
    }

    fn line_with<'a>(lines: &'a [String], needle: &str) -> &'a str {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", lines.join("\n")))
    }

    #[test]
    fn the_fixture_draws_every_panel_and_the_sorted_table() {
        let (lines, _) = render(&ViewState::default(), 160, 40);
        assert!(lines[0].starts_with("headroom top · daemon 127.0.0.1:9717 · every 1s · sampled "));
        assert!(lines[0].ends_with("· sort: footprint ↓"), "{}", lines[0]);
        assert_eq!(
            lines[1],
            "memory   20.0 GiB available of 64.0 GiB   44.0 GiB used (69%)"
        );
        assert_eq!(lines[4], "GPUs");
        assert!(lines[5].starts_with("gpu0 NVIDIA H100 80GB HBM3"));
        line_with(&lines, "Jobs");
        line_with(&lines, "Rules");
        let header = line_with(&lines, "FOOTPRINT");
        for title in [
            "PID", "USER", "KIND", "GROWTH", "FULL IN", "GPU", "JOB", "RULES",
        ] {
            assert!(header.contains(title), "{header}");
        }
        // Rows in footprint order, right under the header.
        let at = lines.iter().position(|l| l.contains("FOOTPRINT")).unwrap();
        let first_pids: Vec<&str> = lines[at + 1..at + 7]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(first_pids, ["4821", "5100", "4830", "4831", "77", "900"]);
        let kernel = &lines[at + 1];
        assert!(kernel.contains("12.0 GiB pss"), "{kernel}");
        assert!(kernel.contains("near notebook-runaway"), "{kernel}");
        assert!(
            kernel.ends_with("python3 · experiments/train.ipynb"),
            "{kernel}"
        );
        assert!(lines[39].starts_with("q quit  s sort"), "{}", lines[39]);
    }

    #[test]
    fn sorting_by_pid_reorders_the_drawn_rows_and_marks_the_header() {
        let mut state = ViewState::default();
        state.on_key(Key::Char('s'), 10);
        state.on_key(Key::Char('s'), 10);
        let (lines, _) = render(&state, 160, 40);
        assert!(lines[0].ends_with("· sort: pid ↑"), "{}", lines[0]);
        let at = lines.iter().position(|l| l.contains("FOOTPRINT")).unwrap();
        let pids: Vec<u32> = lines[at + 1..at + 7]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(pids, [77, 900, 4821, 4830, 4831, 5100]);
    }

    #[test]
    fn scrolling_stops_at_the_last_page() {
        let state = ViewState {
            scroll: usize::MAX,
            show_gpus: false,
            ..ViewState::default()
        };
        // Little room: the table gets its minimum.
        let (lines, page) = render(&state, 100, 16);
        let at = lines.iter().position(|l| l.contains("FOOTPRINT")).unwrap();
        assert!(page < 6, "{page}");
        let last = lines[at + page].split_whitespace().next().unwrap();
        assert_eq!(last, "900", "{}", lines.join("\n"));
    }

    #[test]
    fn help_is_drawn_over_the_view() {
        let mut state = ViewState::default();
        state.on_key(Key::Char('?'), 10);
        let (lines, _) = render(&state, 100, 30);
        line_with(&lines, "headroom top: keys");
        line_with(&lines, "s, F6         next sort");
    }

    #[test]
    fn a_tiny_terminal_draws_without_panicking() {
        for (w, h) in [(1, 1), (10, 3), (40, 8), (200, 2)] {
            let mut state = ViewState::default();
            state.on_key(Key::Char('?'), 10);
            render(&state, w, h);
            render(&ViewState::default(), w, h);
        }
    }
}
