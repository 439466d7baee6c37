//! The PostgreSQL schema's versions: refinery migrations embedded from `migrations/postgres/`,
//! applied on demand, and the start-up check that the database holds exactly this build's
//! version.

use postgres::Client;

use crate::StoreError;

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// Where refinery records what it applied.
const HISTORY: &str = "aril_schema_history";
/// Serialises migrations of concurrent processes (any constant key; this one spells "aril").
const LOCK_KEY: i64 = 0x6172_696c;

/// The newest schema version this build has.
pub const PG_SCHEMA_VERSION: i64 = 7;

fn runner() -> refinery::Runner {
    let mut runner = embedded::migrations::runner();
    runner.set_migration_table_name(HISTORY);
    runner
}

/// The version the database is at (0: never migrated).
fn applied(client: &mut Client) -> Result<i64, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&HISTORY])?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let version: Option<i32> = client
        .query_one(&format!("SELECT MAX(version) FROM {HISTORY}"), &[])?
        .get(0);
    Ok(version.map(i64::from).unwrap_or(0))
}

/// Fails unless the database is at this build's version, saying what to do.
pub(super) fn check(client: &mut Client, url: &str) -> Result<(), StoreError> {
    let found = applied(client)?;
    match found.cmp(&PG_SCHEMA_VERSION) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(StoreError::NewerDatabase {
            url: url.to_string(),
            found,
            supported: PG_SCHEMA_VERSION,
        }),
        std::cmp::Ordering::Less => Err(StoreError::NotMigrated {
            url: url.to_string(),
            found,
            wanted: PG_SCHEMA_VERSION,
        }),
    }
}

/// Applies the migrations up to `version` only, as an older aril left the database (tests of
/// upgrades).
#[cfg(feature = "scratch")]
pub(crate) fn apply_up_to(client: &mut Client, version: u32) -> Result<(), StoreError> {
    runner()
        .set_target(refinery::Target::Version(version))
        .run(client)
        .map_err(|e| StoreError::Migration(e.to_string()))?;
    Ok(())
}

/// Applies what is missing under an advisory lock; refuses a newer database.
pub(super) fn apply(client: &mut Client, url: &str) -> Result<i64, StoreError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])?;
    let result = (|| {
        let found = applied(client)?;
        if found > PG_SCHEMA_VERSION {
            return Err(StoreError::NewerDatabase {
                url: url.to_string(),
                found,
                supported: PG_SCHEMA_VERSION,
            });
        }
        runner()
            .run(client)
            .map_err(|e| StoreError::Migration(e.to_string()))?;
        super::backfill::run(client)?;
        applied(client)
    })();
    client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])?;
    result
}
