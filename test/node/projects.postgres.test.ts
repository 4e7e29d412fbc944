import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { projectsSuite } from "../suites/projects.suite";

projectsSuite(useHarness(postgresHarness));
