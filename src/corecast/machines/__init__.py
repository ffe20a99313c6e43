"""Machine descriptions: one schema for every command (docs/machines.md).

    schema.py   the one reader: the sections, their records, the bounds, the bundled files and
                their aliases (`bundled_description`, `read_file`, `parse`, `uses`), and the JSON form
                `corecast calibrate` writes (`calibration_doc`)
    table.py    typed access to one table, each mistake one line naming the file and key
    legacy.py   the three old forms (predict's targets, sim's machines, calibrate's first JSON),
                read as the schema with a note naming the new form
    *.toml      the bundled machines, one file per physical machine

`predict` (corecast.target.MachineSpec), `sim` (corecast.sim.machine.MachineDescription) and
`sched` (corecast.sched.machine.Machine) build their own views from a `schema.Description`.
This package imports nothing but the shared bottom layer.
"""
