-- A deployment pins the configuration it runs with when queued: resources, options and a digest of the variables
-- (config_snapshot), and the variables themselves, encrypted for the deployment (env_snapshot_ciphertext). Rows written
-- before have neither: the runner reads the live configuration for them.
ALTER TABLE "deployments" ADD COLUMN "config_snapshot" jsonb;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "env_snapshot_ciphertext" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_snapshot_whole" CHECK (("deployments"."config_snapshot" is null) = ("deployments"."env_snapshot_ciphertext" is null));