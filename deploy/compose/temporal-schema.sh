#!/bin/sh
# Creates (or upgrades) Temporal's two PostgreSQL databases. Safe to run on every start:
# "create" fails harmlessly when the database exists and the schema tool skips applied versions.
set -eu
# The password comes from SQL_PASSWORD in the environment, so it is not on the command line.
sql() { temporal-sql-tool --plugin postgres12 --ep postgresql -p 5432 -u "$POSTGRES_USER" "$@"; }
for db in temporal temporal_visibility; do
  case $db in
    temporal) schema=temporal ;;
    *) schema=visibility ;;
  esac
  sql --db "$db" create || true
  sql --db "$db" setup-schema -v 0.0 || true
  sql --db "$db" update-schema -d "/etc/temporal/schema/postgresql/v12/$schema/versioned"
done
