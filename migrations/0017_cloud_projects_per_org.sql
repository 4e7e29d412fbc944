-- cloud_projects is keyed per organization: two organizations of one instance may link to the same cloud organization.
-- (drizzle-kit cannot name the old primary key; it is Postgres' default name.)
DROP INDEX "cloud_projects_org_idx";--> statement-breakpoint
ALTER TABLE "cloud_projects" DROP CONSTRAINT "cloud_projects_pkey";--> statement-breakpoint
ALTER TABLE "cloud_projects" ADD CONSTRAINT "cloud_projects_org_id_id_pk" PRIMARY KEY("org_id","id");
