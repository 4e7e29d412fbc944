import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { settingsSuite } from "../suites/settings.suite";

settingsSuite(useHarness(workerHarness));
