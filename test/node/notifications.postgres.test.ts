import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { notificationsSuite } from "../suites/notifications.suite";

notificationsSuite(useHarness(postgresHarness));
