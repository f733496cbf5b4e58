package chaos

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/quorumlock/fencing"
)

// setupSchema creates the counter, the sections table, the write log and
// the fence table in a run's fresh database.
func setupSchema(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, schema); err != nil {
		return fmt.Errorf("chaos: create schema: %w", err)
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
	row_id int NOT NULL DEFAULT 1, held_ns bigint NOT NULL DEFAULT 0);
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
`
