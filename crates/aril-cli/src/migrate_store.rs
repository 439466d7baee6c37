//! `aril migrate-store`: copies a memory from one store to another (embedded ↔ PostgreSQL) with a
//! progress bar per table and Ctrl-C between pages, then compares both stores table by table.

use anyhow::{Context, bail};
use aril_engine::{StoreAt, Table};

use crate::args::MigrateStoreCmd;
use crate::{Cli, Open, open_store, parse_store, progress};

pub fn run(cli: &Cli, cmd: &MigrateStoreCmd) -> anyhow::Result<()> {
    let (from_dir, from_at) = parse_store(&cmd.from, &cli.data_dir);
    let (to_dir, to_at) = parse_store(&cmd.to, &cli.data_dir);
    if from_at == to_at && (from_at != StoreAt::Embedded || from_dir == to_dir) {
        bail!("--from and --to name the same store");
    }
    let source = open_store(cli, &from_dir, &from_at, Open::Existing)?;
    if let StoreAt::Postgres(_) = &to_at {
        to_at
            .migrate(&to_dir)
            .with_context(|| format!("migrating {}", to_at.describe()))?;
    }
    let mut target = open_store(cli, &to_dir, &to_at, Open::OrStart)?;
    let shown = |dir: &std::path::Path, at: &StoreAt| match at {
        StoreAt::Embedded => dir.display().to_string(),
        pg => pg.describe(),
    };
    let (from_shown, to_shown) = (shown(&from_dir, &from_at), shown(&to_dir, &to_at));
    eprintln!("copying {from_shown} into {to_shown}");

    let cancel = progress::cancel_on_ctrl_c();
    let bar = progress::units_bar("copy", "rows");
    let mut current: Option<Table> = None;
    let report = source.copy_into(
        &mut target,
        &mut |p| {
            if current != Some(p.table) {
                current = Some(p.table);
                bar.set_prefix(p.table.name());
            }
            bar.set_position(p.rows);
        },
        &cancel,
    )?;
    bar.finish_and_clear();
    if report.interrupted {
        eprintln!("interrupted: what was copied is kept; run the same command again to finish");
        std::process::exit(130);
    }
    eprintln!("comparing both stores");
    let (a, b) = (source.fingerprint()?, target.fingerprint()?);
    let same = a == b;
    if cmd.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "from": from_shown, "to": to_shown, "equal": same,
                "copied": report.read.iter().map(|(t, n)| (t.name(), n)).collect::<std::collections::BTreeMap<_, _>>(),
                "from_tables": a.tables, "to_tables": b.tables,
            }))?
        );
    } else {
        println!("{:<16} {:>10} {:>10}  content", "table", "from", "to");
        for (x, y) in a.tables.iter().zip(&b.tables) {
            println!(
                "{:<16} {:>10} {:>10}  {}",
                x.table.name(),
                x.rows,
                y.rows,
                if x.hash == y.hash {
                    format!("equal ({})", &x.hash[..16])
                } else {
                    "DIFFERENT".to_string()
                }
            );
        }
    }
    if !same {
        bail!(
            "the stores differ (see above): the target held other data before, or the source \
             was written during the move"
        );
    }
    eprintln!("done: {to_shown} holds the same memory as {from_shown}");
    Ok(())
}
