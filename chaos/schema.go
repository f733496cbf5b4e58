package chaos

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/quorumlock/fencing"
)

// setupSchema creates the counter, the sections table, the write log,
// the transfers style's accounts and ledger, and the fence table in a
// run's fresh database.
func setupSchema(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, schema); err != nil {
		return fmt.Errorf("chaos: create schema: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO accounts (id, opening, balance) SELECT g, $2, $2 FROM generate_series(1, $1::int) g`,
		transferAccounts, openingBalance); err != nil {
		return fmt.Errorf("chaos: open the accounts: %w", err)
	}
	ft, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	if err != nil {
		return err
	}
	return ft.Setup(ctx, conn)
}

// schema is created in every run's fresh database.
const schema = `
CREATE TABLE counter (
	id int PRIMARY KEY,
	value bigint NOT NULL,
	last_token bigint NOT NULL DEFAULT 0,
	fence bigint NOT NULL DEFAULT 0);
-- Row 1 is the counter of the run's fencing mode; row 2 is written
-- without fencing by the nemesis's unfenced clients.
INSERT INTO counter (id, value) VALUES (1, 0), (2, 0);
CREATE TABLE sections (
	worker int NOT NULL, attempt int NOT NULL, token bigint NOT NULL,
	call_ns bigint NOT NULL, got_ns bigint NOT NULL, deadline_ns bigint NOT NULL,
	end_ns bigint NOT NULL, release_ns bigint NOT NULL,
	read_ns bigint NOT NULL, read_val bigint NOT NULL, outcome text NOT NULL,
	row_id int NOT NULL DEFAULT 1, held_ns bigint NOT NULL DEFAULT 0,
	row2 int NOT NULL DEFAULT 0, token2 bigint NOT NULL DEFAULT 0,
	transfer text NOT NULL DEFAULT '');
-- Every change of the counter, in commit order of the row (the row lock
-- orders them), with the token of the writer.
CREATE TABLE writes (seq bigserial PRIMARY KEY, row_id int NOT NULL, token bigint NOT NULL, value bigint NOT NULL);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.value IS DISTINCT FROM OLD.value THEN
		INSERT INTO writes (row_id, token, value) VALUES (NEW.id, NEW.last_token, NEW.value);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER counter_writes AFTER UPDATE ON counter FOR EACH ROW EXECUTE FUNCTION log_write();
-- The transfers style's accounts (filled by setupAccounts): legs counts
-- the transfers on the account as its writers saw them (read plus one),
-- fence is claim-first's and write-only's stamp. Every change of a
-- balance is logged with the writer's token, in commit order.
CREATE TABLE accounts (
	id int PRIMARY KEY,
	opening bigint NOT NULL,
	balance bigint NOT NULL,
	legs bigint NOT NULL DEFAULT 0,
	last_token bigint NOT NULL DEFAULT 0,
	fence bigint NOT NULL DEFAULT 0);
CREATE TABLE account_writes (seq bigserial PRIMARY KEY, account int NOT NULL, token bigint NOT NULL, balance bigint NOT NULL);
CREATE FUNCTION log_account_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO account_writes (account, token, balance) VALUES (NEW.id, NEW.last_token, NEW.balance);
	RETURN NEW;
END $$;
CREATE TRIGGER account_writes AFTER UPDATE OF balance ON accounts FOR EACH ROW EXECUTE FUNCTION log_account_write();
-- The ledger: one row per committed transfer, written in the transfer's
-- own transaction. The id is deliberately not unique, so that a transfer
-- applied twice shows up as two rows instead of being refused.
CREATE TABLE transfers (
	seq bigserial PRIMARY KEY, id text NOT NULL, worker int NOT NULL,
	src int NOT NULL, dst int NOT NULL, amount bigint NOT NULL,
	token_src bigint NOT NULL, token_dst bigint NOT NULL);
`
