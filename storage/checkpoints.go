package storage

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

const checkpointColumns = `id, subject, coalesce(name, ''), prefix, note, pos, coalesce(agent_id, ''), coalesce(run_id, ''), created_at`

func scanCheckpoint(row pgx.Row) (*agentfs.Checkpoint, error) {
	var c agentfs.Checkpoint
	err := row.Scan(&c.ID, &c.Subject, &c.Name, &c.Prefix, &c.Note, &c.Position, &c.By.AgentID, &c.By.RunID, &c.CreatedAt)
	if err != nil {
		return nil, Translate(err)
	}
	return &c, nil
}

// insertCheckpointEvent writes a checkpoint.* event of the checkpoint c
// (a CTE of the statement): it names no file.
func insertCheckpointEvent(typ string) string {
	return `INSERT INTO events (subject, type, file_id, path, checkpoint_id, agent_id, run_id, idempotency_key, request_id, batch_id)
		SELECT subject, '` + typ + `', '', prefix, id, nullif(@agent_id, ''), nullif(@run_id, ''),
			nullif(@idempotency_key, ''), nullif(@request_id, ''), nullif(@batch_id, '') FROM c`
}

// CreateCheckpointTx makes a checkpoint of the subject's present in tx: the
// position of its last committed event (everything committed before is at
// or below it; what commits meanwhile comes after), one row and one event,
// whatever the number of files. A name the subject already uses is a
// *agentfs.CheckpointExistsError.
func (s *Store) CreateCheckpointTx(ctx context.Context, tx pgx.Tx, req agentfs.NewCheckpoint, o agentfs.Origin) (*agentfs.Checkpoint, error) {
	c, err := scanCheckpoint(tx.QueryRow(ctx, `WITH c AS (
			INSERT INTO checkpoints (id, subject, name, prefix, note, pos, agent_id, run_id)
			VALUES (@id, @subject, nullif(@name, ''), @prefix, @note,
				coalesce((SELECT n FROM event_counters WHERE subject = @subject), 0),
				nullif(@by_agent, ''), nullif(@by_run, ''))
			RETURNING *),
		e AS (`+insertCheckpointEvent(agentfs.EventCheckpointCreated)+`)
		SELECT `+checkpointColumns+` FROM c`,
		originArgs(o, pgx.NamedArgs{"id": NewID("ckpt"), "subject": req.Subject, "name": req.Name,
			"prefix": req.Prefix, "note": req.Note, "by_agent": req.By.AgentID, "by_run": req.By.RunID})))
	if uniqueViolation(err, "checkpoints_name") {
		return nil, &agentfs.CheckpointExistsError{Name: req.Name}
	}
	if err != nil {
		return nil, fmt.Errorf("create checkpoint: %w", err)
	}
	return c, nil
}

// DeleteCheckpointTx forgets the subject's checkpoint (by id or name) in
// tx, with its checkpoint.deleted event; the versions it kept may then be
// swept. An unknown one is agentfs.ErrNotFound.
func (s *Store) DeleteCheckpointTx(ctx context.Context, tx pgx.Tx, subject, idOrName string, o agentfs.Origin) (*agentfs.Checkpoint, error) {
	args := originArgs(o, pgx.NamedArgs{"subject": subject, "ref": idOrName})
	c, err := scanCheckpoint(tx.QueryRow(ctx, `WITH c AS (
			DELETE FROM checkpoints WHERE subject = @subject AND (id = @ref OR name = @ref)
				AND `+visiblePath(ctx, "prefix", args)+` RETURNING *),
		e AS (`+insertCheckpointEvent(agentfs.EventCheckpointDeleted)+`)
		SELECT `+checkpointColumns+` FROM c`, args))
	if err != nil {
		return nil, fmt.Errorf("delete checkpoint: %w", err)
	}
	return c, nil
}

// Checkpoint is the subject's checkpoint by id or name. A scoped caller
// (the reach of ctx) finds only the checkpoints of folders inside its
// prefixes: one of every path, or of another folder, keeps versions it
// cannot see. (Naming one as a point still resolves, ResolvePoint: what
// is read at it is held to the reach.)
func (s *Store) Checkpoint(ctx context.Context, subject, idOrName string) (*agentfs.Checkpoint, error) {
	args := pgx.NamedArgs{"subject": subject, "ref": idOrName}
	return scanOne("checkpoint", scanCheckpoint, s.pool.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM checkpoints
		WHERE subject = @subject AND (id = @ref OR name = @ref) AND `+visiblePath(ctx, "prefix", args), args))
}

// ListCheckpoints lists the subject's checkpoints newest first, those of
// prefixes under filter.Prefix when it is set, and only those a scoped
// caller may see (Checkpoint).
func (s *Store) ListCheckpoints(ctx context.Context, subject string, filter agentfs.CheckpointFilter) ([]*agentfs.Checkpoint, error) {
	w := newFilter("subject = @subject", pgx.NamedArgs{"subject": subject, "limit": filter.Limit})
	w.cond(visiblePath(ctx, "prefix", w.args))
	w.when(filter.Prefix != "", `prefix LIKE @prefix ESCAPE '\'`, pgx.NamedArgs{"prefix": likePrefix(filter.Prefix)})
	if c := filter.After; c != nil {
		w.when(true, "(created_at, id) < (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": c.CreatedAt, "after_id": c.ID})
	}
	rows, err := s.pool.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE `+w.where()+
		` ORDER BY created_at DESC, id DESC LIMIT @limit`, w.args)
	return collect(rows, err, "list checkpoints", rowOf(scanCheckpoint))
}

// pinnedBy is the SQL condition that a checkpoint keeps the file fileID
// (an SQL expression), or only its version version when that is not "":
// the file was live under the checkpoint's prefix, with that version, at
// the checkpoint's position (DESIGN §18: neither the version retention nor
// AGENTFS_MAX_VERSIONS sweeps it, nor does a purge).
func pinnedBy(fileID, version string) string {
	cond := "ps.file_id = " + fileID
	if version != "" {
		cond += " AND ps.version = " + version
	}
	return `EXISTS (SELECT 1 FROM file_states ps JOIN checkpoints pc ON pc.subject = ps.subject
		AND ps.from_pos <= pc.pos AND (ps.to_pos IS NULL OR ps.to_pos > pc.pos)
		AND (ps.expires_at IS NULL OR ps.expires_at > pc.created_at) AND starts_with(ps.path, pc.prefix)
		WHERE ` + cond + `)`
}
