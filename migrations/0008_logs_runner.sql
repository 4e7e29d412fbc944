CREATE TABLE "log_lines" (
	"project_id" text NOT NULL,
	"seq" bigint NOT NULL,
	"org_id" text NOT NULL,
	"deployment_id" text,
	"kind" text NOT NULL,
	"stream" text NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"message" text NOT NULL,
	"fields" jsonb,
	CONSTRAINT "log_lines_project_id_seq_pk" PRIMARY KEY("project_id","seq")
);
--> statement-breakpoint
CREATE TABLE "log_sequences" (
	"project_id" text PRIMARY KEY NOT NULL,
	"last" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "services" jsonb;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "services_ciphertext" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "served_by" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "port" integer;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "crashed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "log_lines" ADD CONSTRAINT "log_lines_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "log_lines" ADD CONSTRAINT "log_lines_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "log_lines" ADD CONSTRAINT "log_lines_deployment_id_deployments_id_fk" FOREIGN KEY ("deployment_id") REFERENCES "public"."deployments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "log_sequences" ADD CONSTRAINT "log_sequences_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "log_lines_deployment_idx" ON "log_lines" USING btree ("deployment_id","kind","seq");--> statement-breakpoint
CREATE INDEX "log_lines_project_kind_idx" ON "log_lines" USING btree ("project_id","kind","seq");--> statement-breakpoint
CREATE INDEX "log_lines_at_idx" ON "log_lines" USING btree ("at");