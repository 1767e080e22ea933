-- The hand-written migrations of the store before Alembic (orchestrator/state/migrations.py until it was
-- replaced), as they were applied: tests/unit/state/test_migrations.py builds old stores with them.
-- Each starts at a line `-- migration: NAME`; the old code recorded NAME in the `migrations` table.

-- migration: 0001_initial
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,                 -- the terminal state a tearing-down job heads for
    reason TEXT NOT NULL DEFAULT '',
    spec_json TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    cloud_json TEXT NOT NULL,     -- where the job runs: region, endpoint, appid, bucket (no secrets)
    attempt INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    deadline REAL NOT NULL,       -- max_runtime from creation: the instances' ActionTimer
    image_id TEXT,
    exit_code INTEGER,
    cost_cny REAL NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    keep_until REAL,
    final_step INTEGER,
    lease_owner TEXT,
    lease_token INTEGER NOT NULL DEFAULT 0,
    lease_expires REAL NOT NULL DEFAULT 0
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs(job_id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,           -- transition | note | phase | launch | preemption | bill | ...
    from_state TEXT,
    to_state TEXT,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_job ON events(job_id, id);
CREATE TABLE nodes (
    job_id TEXT NOT NULL REFERENCES jobs(job_id),
    attempt INTEGER NOT NULL,
    node INTEGER NOT NULL,
    client_token TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    charge_type TEXT NOT NULL,
    price_per_hour REAL,
    instance_id TEXT,
    state TEXT NOT NULL,          -- intent | launched | running | lost | failed | gone
    launched_at REAL,
    running_at REAL,
    ended_at REAL,
    end_reason TEXT NOT NULL DEFAULT '',
    cost_cny REAL,
    PRIMARY KEY (job_id, attempt, node)
);
CREATE TABLE images (
    image_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(job_id),
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    deleted_at REAL
);

-- migration: 0002_job_source_dir
-- The folder of the spec file: workdir and emulator seeds are relative to it, and a job resumed after a
-- crash in STAGING needs it again.
ALTER TABLE jobs ADD COLUMN source_dir TEXT NOT NULL DEFAULT '';
-- The settings decide() reads (spec knobs and the recovery policy as resolved at submission), so a
-- resumed job behaves as it was submitted even if policy files changed since.
ALTER TABLE jobs ADD COLUMN settings_json TEXT NOT NULL DEFAULT '{}';

-- migration: 0003_reserved_pool
-- Prepaid instances a team keeps between jobs (billing.mode: reserved). The cloud knows them by their
-- cvmjob:pool tag; this table records which job holds which one (claims are atomic here).
CREATE TABLE pool_instances (
    instance_id TEXT PRIMARY KEY,
    pool TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    job_id TEXT,                  -- NULL: idle
    since REAL NOT NULL
);
ALTER TABLE nodes ADD COLUMN on_demand_price_per_hour REAL;

-- migration: 0004_drop_emulator_seed
-- data[].emulator_seed left the job spec (the emulator seeds example data itself: `cvmjob emulator seed`);
-- stored specs drop it so that jobs submitted before still validate.
UPDATE jobs SET spec_json = (
    SELECT json_set(jobs.spec_json, '$.data', json_group_array(json(json_remove(d.value, '$.emulator_seed'))))
    FROM json_each(jobs.spec_json, '$.data') AS d
)
WHERE spec_json LIKE '%"emulator_seed"%';
