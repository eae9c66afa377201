use retry_runtime::retry;

#[retry(max = 2)]
extern "C" fn read_sensor() -> Result<u16, std::io::Error> {
    Ok(7)
}

fn main() {}
