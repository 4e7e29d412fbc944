import { useHarness } from "../support/harness";
import { workerNotificationsEnv } from "../support/notifications-env-worker";
import { notificationsDeliverySuite } from "../suites/notifications-delivery.suite";

const env = workerNotificationsEnv();
notificationsDeliverySuite(useHarness(env.harness), env);
