import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectsSuite } from "../suites/projects.suite";

projectsSuite(useHarness(pgliteHarness));
