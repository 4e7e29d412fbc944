-- Every change that can alter what a token may do is announced on the
-- `workspace_auth` channel with the affected user's id, so each process evicts
-- its cached token lookups for that user (shared/auth/auth-cache.ts).
CREATE OR REPLACE FUNCTION workspace_auth_notify_user_rows() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('workspace_auth', OLD.user_id);
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR OLD.user_id IS DISTINCT FROM NEW.user_id) THEN
    PERFORM pg_notify('workspace_auth', NEW.user_id);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION workspace_auth_notify_users() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('workspace_auth', OLD.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER api_tokens_auth_notify AFTER UPDATE OR DELETE ON api_tokens
  FOR EACH ROW EXECUTE FUNCTION workspace_auth_notify_user_rows();
--> statement-breakpoint
CREATE TRIGGER memberships_auth_notify AFTER INSERT OR UPDATE OR DELETE ON memberships
  FOR EACH ROW EXECUTE FUNCTION workspace_auth_notify_user_rows();
--> statement-breakpoint
CREATE TRIGGER users_auth_notify AFTER UPDATE OR DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION workspace_auth_notify_users();
