pub fn placeholder(){}
