"""The lab's Kedro pipelines, registered through the ``ragfolio.pipelines`` entry points."""
