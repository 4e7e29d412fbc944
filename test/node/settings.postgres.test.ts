import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { settingsSuite } from "../suites/settings.suite";

settingsSuite(useHarness(postgresHarness));
