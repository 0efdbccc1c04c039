-- Each agent's compaction thresholds (reserve, soft threshold, byte limit), projected from
-- `agent.configured`; a missing field means the deployment's default (CAIRN_SESSION_*).
ALTER TABLE session.agent_settings ADD COLUMN compaction jsonb NOT NULL DEFAULT '{}'::jsonb;
