-- Backup and restore (issue 24): facts about the instance; keyring_check detects a start with other secret keys than the data's.
CREATE TABLE "instance_facts" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
